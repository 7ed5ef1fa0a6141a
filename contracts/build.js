#!/usr/bin/env node
// Reproducible build of the vxla contracts with the pinned solc-js of package-lock.json.
//
// Reads every contracts/src/*.sol, writes the complete standard-JSON compiler input to
// <out>/standard-input.json and one artifact per contract to <out>/artifacts/<Name>.json.
// Without --out, <out> is this folder, so the committed input and artifacts are rewritten.
// Everything that can change the bytes is pinned here: compiler version (package-lock.json),
// optimizer, EVM version, and no metadata hash or CBOR trailer in the bytecode.
'use strict';

const fs = require('fs');
const path = require('path');
const solc = require('solc');

const EXPECTED_SOLC = '0.8.28+commit.7893614a.Emscripten.clang';
const HERE = __dirname;
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  viaIR: false,
  metadata: { bytecodeHash: 'none', appendCBOR: false },
  outputSelection: {
    '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object', 'evm.methodIdentifiers'] },
  },
};

function parseArgs(argv) {
  let out = HERE;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out') {
      out = path.resolve(argv[++i]);
    } else {
      throw new Error(`unknown argument ${argv[i]} (usage: node build.js [--out DIR])`);
    }
  }
  return { out };
}

function standardInput() {
  const srcDir = path.join(HERE, 'src');
  // Sorted names: the input (and so the output order) does not depend on directory order.
  const names = fs.readdirSync(srcDir).filter((n) => n.endsWith('.sol')).sort();
  const sources = {};
  for (const name of names) {
    sources[`src/${name}`] = { content: fs.readFileSync(path.join(srcDir, name), 'utf8') };
  }
  return { language: 'Solidity', sources, settings: SETTINGS };
}

function main() {
  const { out } = parseArgs(process.argv.slice(2));
  if (solc.version() !== EXPECTED_SOLC) {
    throw new Error(`solc ${solc.version()} is not the pinned ${EXPECTED_SOLC}; run npm ci`);
  }
  const input = standardInput();
  const inputText = JSON.stringify(input, null, 2) + '\n';
  const output = JSON.parse(solc.compile(inputText));
  const errors = (output.errors || []).filter((e) => e.severity === 'error');
  for (const e of output.errors || []) process.stderr.write(e.formattedMessage + '\n');
  if (errors.length > 0) process.exit(1);

  fs.mkdirSync(path.join(out, 'artifacts'), { recursive: true });
  fs.writeFileSync(path.join(out, 'standard-input.json'), inputText);
  for (const sourceName of Object.keys(output.contracts).sort()) {
    for (const name of Object.keys(output.contracts[sourceName]).sort()) {
      const c = output.contracts[sourceName][name];
      const artifact = {
        contractName: name,
        sourceName,
        compiler: solc.version(),
        settings: { optimizer: SETTINGS.optimizer, evmVersion: SETTINGS.evmVersion, viaIR: SETTINGS.viaIR },
        abi: c.abi,
        bytecode: '0x' + c.evm.bytecode.object,
        deployedBytecode: '0x' + c.evm.deployedBytecode.object,
        methodIdentifiers: c.evm.methodIdentifiers,
      };
      fs.writeFileSync(path.join(out, 'artifacts', `${name}.json`), JSON.stringify(artifact, null, 2) + '\n');
    }
  }
}

main();
