#!/usr/bin/env node
import { startPortico } from "../app.js";
import { ConfigError, describeSettings, loadConfig } from "../config.js";
import { doctor } from "./doctor.js";

const USAGE = `usage: portico serve [flags]
       portico doctor [flags]

serve   starts the portal server.
doctor  checks the settings and the database of a deployment, changing nothing; exits 1 when a
        check fails. Give it the settings the nodes run with.

Every flag has an environment variable; the flag wins.
${describeSettings()}
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "help" || command === "--help" || rest.includes("--help")) {
    process.stdout.write(USAGE);
    return command === undefined ? 1 : 0;
  }
  if (command !== "serve" && command !== "doctor") {
    process.stderr.write(`portico: unknown command '${command}'\n\n${USAGE}`);
    return 2;
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(rest);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`portico: invalid setting ${err.message}\n`);
      if (command === "doctor") process.stdout.write(`FAIL  settings: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (command === "doctor") {
    const findings = await doctor(config);
    for (const f of findings) process.stdout.write(`${f.level.padEnd(5)} ${f.check}: ${f.detail}\n`);
    return findings.some((f) => f.level === "FAIL") ? 1 : 0;
  }
  // Handlers first: the server answers as soon as it listens, while start-up still starts the
  // background engines, and a SIGTERM in that window would otherwise end the process unclean. A
  // signal that arrives before start-up is done is acted on once it is.
  let requested: string | undefined;
  let stop = (signal: string) => {
    requested ??= signal;
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  const portico = await startPortico({ config });
  portico.app.log.info(
    {
      address: portico.address,
      httpsAddress: portico.httpsAddress,
      publicUrl: portico.publicUrl,
      database: portico.db.engine,
    },
    `portico listening at ${portico.publicUrl}${config.contextPath}/sharing/rest`,
  );
  let stopping = false;
  stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    portico.app.log.info({ signal }, "shutting down");
    // Requests and syncs get the grace period too; a shutdown that still hangs after it (a
    // request stuck on a dead database, say) must not keep the process alive for ever.
    setTimeout(
      () => {
        portico.app.log.error({ signal }, "shutdown did not finish in time; exiting");
        process.exit(1);
      },
      (config.shutdownGraceSeconds + 20) * 1000,
    ).unref();
    portico.close().then(
      () => process.exit(0),
      (err: unknown) => {
        portico.app.log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  if (requested) stop(requested);
  return -1;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`portico: failed to start: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
