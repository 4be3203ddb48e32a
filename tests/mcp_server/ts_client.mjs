// A client kgot did not write: the official TypeScript SDK (@modelcontextprotocol/sdk) talking
// to `kgot mcp serve`, driven by tests/mcp_server/test_mcp_foreign_client.py.
//
// Usage: node ts_client.mjs SPEC_JSON
//   SPEC_JSON = {"transport": "stdio", "command": "...", "args": [...],
//                "entity": "a", "newId": "...", "listOnly": false}
//            or {"transport": "http", "url": "http://.../mcp", "token": "...", ...}
// The stdio server gets this process's environment (the SDK would otherwise pass only a few
// variables such as HOME and PATH, and the tests isolate the server's settings through
// XDG_* variables). Prints one JSON document on stdout; any failure exits 1 with the error
// on stderr.
//
// The SDK's Client checks every structured result against the output schema the tool listed
// (callTool throws when it does not match), so each call below also tests that kgot's results
// keep the schemas kgot announces.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const spec = JSON.parse(process.argv[2]);

function transportFor(spec) {
  if (spec.transport === "stdio") {
    return new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      env: { ...process.env },
      stderr: "ignore",
    });
  }
  const headers = spec.token ? { Authorization: `Bearer ${spec.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers } });
}

// What a test needs of a tool result: the error flag, the text, the structured content.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  return {
    isError: result.isError === true,
    text: (result.content ?? []).map((block) => block.text ?? "").join("\n"),
    structured: result.structuredContent ?? null,
  };
}

async function read(client, uri) {
  const result = await client.readResource({ uri });
  return result.contents.map((item) => ({
    uri: item.uri,
    mimeType: item.mimeType ?? null,
    json: JSON.parse(item.text),
  }));
}

async function main() {
  const client = new Client({ name: "kgot-foreign-client-test", version: "1.0.0" });
  await client.connect(transportFor(spec));
  const out = {
    server: client.getServerVersion() ?? null,
    capabilities: Object.keys(client.getServerCapabilities() ?? {}).sort(),
  };
  const tools = (await client.listTools()).tools;
  out.tools = Object.fromEntries(
    tools.map((tool) => [
      tool.name,
      {
        inputType: tool.inputSchema?.type ?? null,
        properties: Object.keys(tool.inputSchema?.properties ?? {}).sort(),
        required: [...(tool.inputSchema?.required ?? [])].sort(),
        hasOutputSchema: tool.outputSchema !== undefined,
        described: typeof tool.description === "string" && tool.description.length > 0,
      },
    ]),
  );
  if (!spec.listOnly) {
    out.templates = (await client.listResourceTemplates()).resourceTemplates
      .map((template) => template.uriTemplate)
      .sort();
    out.calls = {
      search: await call(client, "search_memory", { query: "Apple" }),
      node: await call(client, "get_node", { id: "apple_old" }),
      missing: await call(client, "get_node", { id: "no_such_node" }),
      verify: await call(client, "verify_claim", {
        subject: "Apple",
        property: "ceo",
        value: "Tim Cook",
      }),
      save: await call(client, "save_facts", {
        nodes: [{ id: spec.newId, label: "Place", properties: { name: "Fremantle" } }],
        source_ref: "test:ts-client",
      }),
    };
    out.calls.saved = await call(client, "get_node", { id: spec.newId });
    out.resources = {
      stats: await read(client, `kgot://entities/${spec.entity}/stats`),
      node: await read(client, `kgot://entities/${spec.entity}/nodes/apple`),
    };
  }
  await client.close();
  return out;
}

main().then(
  (out) => {
    process.stdout.write(JSON.stringify(out) + "\n");
    process.exit(0);
  },
  (error) => {
    process.stderr.write(`${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
