// What an error says, for a log line or a message: its message, or what it is when it is no Error.
export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
