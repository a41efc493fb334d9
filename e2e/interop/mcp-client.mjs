// The official TypeScript MCP client (@modelcontextprotocol/sdk, the
// version package-lock.json pins) against the executor's MCP server, for
// e2e/mcpserve_test.go. Nobody here wrote the client: this script only
// drives it and prints what it saw as one JSON line on stdout.
//
//   node mcp-client.mjs URL KEY list
//   node mcp-client.mjs URL KEY call TOOL TASK
//   node mcp-client.mjs URL KEY cancel TOOL TASK CANCEL_ON
//
// call follows the run with a progress handler and prints the progress
// messages and the result. cancel aborts the call (the client sends
// notifications/cancelled) as soon as a progress message contains
// CANCEL_ON, then, with its session and connection still open (no DELETE,
// no disconnect), reads the run's status from the REST API until it is
// cancelled (statusWhileConnected): only the cancellation can have
// cancelled it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, key, command, tool, task, cancelOn] = process.argv.slice(2);

// runIdOf reads the run id from the first progress message ("run <id> of
// <hierarchy> started").
function runIdOf(progress) {
  const m = /^run (\S+) /.exec(progress[0]?.message ?? '');
  return m ? m[1] : '';
}

// statusWhenCancelled polls runs/get (POST <API>/runs/get) for up to 30 s
// until the run is cancelled, and returns its last status.
async function statusWhenCancelled(id) {
  const api = url.replace(/\/mcp$/, '');
  let status = '';
  for (const deadline = Date.now() + 30000; Date.now() < deadline; ) {
    const resp = await fetch(`${api}/runs/get`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ id }),
    });
    status = (await resp.json())?.data?.status ?? `HTTP ${resp.status}`;
    if (status === 'cancelled') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return status;
}
const out = { command, progress: [] };

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: key ? { headers: { Authorization: `Bearer ${key}` } } : undefined,
});
const client = new Client({ name: 'executor-e2e', version: '1.0.0' });

try {
  await client.connect(transport);
  out.sessionId = transport.sessionId;
  out.serverInfo = client.getServerVersion();
  if (command === 'list') {
    out.tools = (await client.listTools()).tools;
  } else if (command === 'call' || command === 'cancel') {
    const abort = new AbortController();
    const options = {
      signal: abort.signal,
      timeout: 120000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => {
        out.progress.push(p);
        if (command === 'cancel' && p.message && p.message.includes(cancelOn) && !abort.signal.aborted) {
          abort.abort('the e2e test cancels');
        }
      },
    };
    try {
      out.result = await client.callTool({ name: tool, arguments: { task } }, undefined, options);
    } catch (err) {
      out.error = { message: String(err?.message ?? err), code: err?.code };
    }
    if (command === 'cancel') {
      // The session and the call's connection stay open (no DELETE, no
      // disconnect) while the run's status is read from the REST API:
      // only notifications/cancelled can have cancelled it.
      out.statusWhileConnected = await statusWhenCancelled(runIdOf(out.progress));
    } else {
      await transport.terminateSession();
    }
  } else {
    throw new Error(`unknown command ${command}`);
  }
} catch (err) {
  out.error = { message: String(err?.message ?? err), code: err?.code };
}
process.stdout.write(JSON.stringify(out) + '\n');
await client.close().catch(() => {});
process.exit(0);
