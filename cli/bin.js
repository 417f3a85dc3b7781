#!/usr/bin/env node
// `scalegate` command line: runs the compiled bundle (cli/bundle.js builds it, again whenever a
// source changed), or the TypeScript entry through tsx where no bundle can be built.
const { compiledCli } = require('./bundle.js');

const bundle = compiledCli();
if (bundle) {
  require(bundle).main();
} else {
  require('tsx/cjs');
  require('./main.ts').main();
}
