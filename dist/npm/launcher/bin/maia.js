#!/usr/bin/env node
// The `maia` command of the npm launcher package: finds the platform
// package npm installed beside it (one optional dependency per platform,
// only the one matching this machine's os and cpu is installed) and runs
// its binary with the same arguments, standard streams and exit status.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

// "<os>-<cpu>" → platform package name, written by dist/npm/build.sh from
// dist/platforms.
const supported = require("./platforms.json");

function binaryPath() {
  const key = `${process.platform}-${process.arch}`;
  const name = supported[key];
  if (!name) {
    process.stderr.write(
      `maia: no build for ${key}; MAIA is released for ${Object.keys(supported).join(", ")}.\n` +
        "Build it from source instead: https://github.com/maia-editors/maia#first-run\n",
    );
    process.exit(1);
  }
  try {
    const manifest = require.resolve(`${name}/package.json`);
    return path.join(path.dirname(manifest), "bin", "maia");
  } catch {
    process.stderr.write(
      `maia: the package ${name} is not installed beside the maia launcher.\n` +
        "npm installs it as an optional dependency; it is left out when optional\n" +
        "dependencies are off (--omit=optional, --no-optional): install again with them on.\n",
    );
    process.exit(1);
  }
}

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => {
  process.stderr.write(`maia: cannot start ${error.path || "the binary"}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
