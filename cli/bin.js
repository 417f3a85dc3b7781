#!/usr/bin/env node
// `scalegate` command line: registers tsx, then runs the TypeScript entry.
require('tsx/cjs');
require('./main.ts').main();
