-- Every placement write takes the next value of this sequence, so the reconcile pass can tell in
-- one read (with the registry revision) whether anything it decides from has moved.
create sequence placement_change;
alter table placements add column change_seq bigint not null default nextval('placement_change');
