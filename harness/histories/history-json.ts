// Workflow history <-> ProtoJSON, the format `temporal workflow show -o json` and the Web UI export
// write, for the committed replay histories.
//
// Why not the SDK's historyToJSON / historyFromJSON (@temporalio/common/lib/proto-utils)? In this
// install they throw "type must be a Type", and so does Worker.runReplayHistory when handed a
// parsed JSON file (it calls historyFromJSON): npm hoists protobufjs 7 (for @grpc/proto-loader) and
// gives @temporalio/common, /proto and /worker each their own protobufjs 8 copy; protojson's
// `instanceof Type` check then fails across copies. This module runs the same conversion with the
// protobufjs copy that @temporalio/proto's types were built with, and hands the replayer decoded
// histories. Once the copies are deduplicated, the SDK helpers work and this file can go.
import { createRequire } from 'node:module';
import { temporal } from '@temporalio/proto';
import * as proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root';

export type History = temporal.api.history.v1.IHistory;

interface ProtoJson {
  toJson(type: unknown, message: unknown): unknown;
  fromJson(type: unknown, json: unknown, options?: { ignoreUnknownFields?: boolean }): unknown;
}

const protojson = createRequire(require.resolve('@temporalio/proto'))('protobufjs/ext/protojson') as ProtoJson;
const historyType = (patchProtobufRoot(proto) as unknown as { lookupType(name: string): unknown }).lookupType('temporal.api.history.v1.History');

/** A history (e.g. from `handle.fetchHistory()`) as ProtoJSON text, two-space indented. */
export function historyToJSON(history: History): string {
  return JSON.stringify(protojson.toJson(historyType, temporal.api.history.v1.History.fromObject(history)), null, 2);
}

/** A parsed ProtoJSON history back to the decoded form the replayer takes; unknown fields (a newer server's) are ignored. */
export function historyFromJSON(json: unknown): History {
  if (typeof json !== 'object' || json === null || !Array.isArray((json as { events?: unknown }).events)) {
    throw new TypeError('not a workflow history: expected an object with an array of events');
  }
  return protojson.fromJson(historyType, json, { ignoreUnknownFields: true }) as History;
}
