// Drives simlock's /mcp with the official MCP TypeScript SDK's Streamable
// HTTP client, for TestTheTypeScriptSDKClientLeasesUsesAndReleasesThroughAGateway.
//
// Usage: node clients.cjs <mcp endpoint> <token A> <token B> <token C>
//
// Clients A and B (one token each) lease at once with a progress token,
// then each checks its lease and runs a command on it; client C's
// lease_simulator call then waits until the test says "abort" on stdin and
// is cancelled through an AbortController; on "release" A and B release.
// Every step is one JSON line on stdout: the test judges them. The SDK is
// found through NODE_PATH.
"use strict";

const readline = require("node:readline");
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [endpoint, ...tokens] = process.argv.slice(2);
if (!endpoint || tokens.length !== 3) {
  console.error("usage: node clients.cjs <mcp endpoint> <token A> <token B> <token C>");
  process.exit(2);
}

const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// lines yields what the test writes on stdin, one line at a time.
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function expect(word) {
  const { value, done } = await lines.next();
  if (done || value.trim() !== word) {
    throw new Error(`wanted "${word}" on stdin, got ${done ? "its end" : JSON.stringify(value)}`);
  }
}

async function connect(name, token) {
  const client = new Client({ name: "simlock-e2e-" + name, version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { Authorization: "Bearer " + token } },
  });
  await client.connect(transport);
  return client;
}

// answer is a tool result's JSON (structured content, else its text).
function answer(res) {
  if (res.structuredContent) return res.structuredContent;
  const text = (res.content || []).find((c) => c.type === "text");
  return text ? JSON.parse(text.text) : null;
}

async function lease(name, client) {
  const progress = [];
  const res = await client.callTool(
    { name: "lease_simulator", arguments: { platform: "ios", waitSeconds: 30 } },
    undefined,
    { onprogress: (p) => progress.push(p.progress), timeout: 60_000 },
  );
  const grant = answer(res);
  say({ client: name, step: "lease", isError: !!res.isError, progress, grant });
  return grant;
}

async function use(name, client, grant) {
  const leaseId = grant.lease.id;
  const status = await client.callTool({ name: "lease_status", arguments: { leaseId } });
  const exec = await client.callTool({
    name: "run_on_device",
    arguments: { leaseId, tool: "simctl", args: ["getenv", grant.device.driverDeviceId, "HOME"] },
  });
  // Install the app the test gave (base64 in SIMLOCK_TEST_APP), launch it,
  // and take a screenshot: the image content block's bytes go back to the
  // test, which decodes them as a PNG.
  const install = await client.callTool({
    name: "install_app",
    arguments: { leaseId, contentBase64: process.env.SIMLOCK_TEST_APP },
  });
  const launch = await client.callTool({
    name: "launch_app",
    arguments: { leaseId, appId: process.env.SIMLOCK_TEST_APP_ID },
  });
  const shot = await client.callTool({ name: "screenshot", arguments: { leaseId } });
  const image = (shot.content || []).find((c) => c.type === "image");
  say({
    client: name, step: "use", leaseId, deviceId: grant.device.id,
    status: answer(status), statusError: !!status.isError,
    exec: answer(exec), execError: !!exec.isError,
    install: answer(install), installError: !!install.isError,
    launch: answer(launch), launchError: !!launch.isError,
    screenshotError: !!shot.isError,
    screenshotMime: image ? image.mimeType : "",
    screenshotBase64: image ? image.data : "",
  });
}

async function main() {
  const [a, b, c] = await Promise.all([connect("A", tokens[0]), connect("B", tokens[1]), connect("C", tokens[2])]);
  const [ga, gb] = await Promise.all([lease("A", a), lease("B", b)]);
  await Promise.all([use("A", a, ga), use("B", b, gb)]);

  // A's lease seen from B's session: not B's.
  const other = await b.callTool({ name: "lease_status", arguments: { leaseId: ga.lease.id } });
  say({ client: "B", step: "other", status: answer(other), isError: !!other.isError });

  const abort = new AbortController();
  const progress = [];
  const waiting = c
    .callTool(
      { name: "lease_simulator", arguments: { platform: "ios", waitSeconds: 50 } },
      undefined,
      { onprogress: (p) => progress.push(p.progress), signal: abort.signal, timeout: 60_000 },
    )
    .then(
      (res) => ({ settled: "answered", result: answer(res) }),
      (err) => ({ settled: "rejected", error: String(err && err.message ? err.message : err) }),
    );
  say({ client: "C", step: "calling" });
  await expect("abort");
  abort.abort("the test cancels the wait");
  const end = await waiting;
  say({ client: "C", step: "aborted", progress, ...end });

  await expect("release");
  const [ra, rb] = await Promise.all([
    a.callTool({ name: "release_simulator", arguments: { leaseId: ga.lease.id } }),
    b.callTool({ name: "release_simulator", arguments: { leaseId: gb.lease.id } }),
  ]);
  say({ client: "A", step: "release", result: answer(ra), isError: !!ra.isError });
  say({ client: "B", step: "release", result: answer(rb), isError: !!rb.isError });
  await Promise.all([a.close(), b.close(), c.close()]);
  say({ step: "done" });
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exit(1);
  },
);
