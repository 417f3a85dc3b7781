// `npm start`: the embedded default (embedded/stack.ts), until Ctrl-C or SIGTERM.
import { runEmbeddedStack } from '../embedded/stack';

runEmbeddedStack();
