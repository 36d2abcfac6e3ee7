#!/usr/bin/env bash
# toolgate quick start: put a policy in front of an MCP server (here the filesystem server).
# Needs `toolgate` on PATH and Node (npx). Run it in an empty folder.
set -euo pipefail
DIR="${DIR:-/tmp/toolgate-quickstart}"     # the folder the filesystem server may touch
SERVER=(npx -y @modelcontextprotocol/server-filesystem@2026.8.31 "$DIR")
mkdir -p "$DIR"

# 1. Start the server once, list its tools, write a starter policy: reads run, writes
#    (write_file, edit_file, move_file, create_directory) wait for a person's confirmation.
#    --read-only-from-hints takes the server's read-only annotations at their word (this is
#    the official filesystem server, pinned); without it those tools wait for a person too,
#    each with a comment saying how to make it read_only once you checked it.
toolgate init --read-only-from-hints --out tool_policies.yaml -- "${SERVER[@]}"

# 2. Review tool_policies.yaml, then check it against the live server (keys, tool names, pins).
toolgate check --policy tool_policies.yaml -- "${SERVER[@]}"

# 3. Point your MCP client at the gateway instead of the server: it starts
#    `toolgate proxy --policy tool_policies.yaml -- <server>`. E.g. its mcp.json:
cat > mcp.json <<JSON
{ "mcpServers": { "filesystem": { "command": "toolgate", "args": ["proxy", "--policy", "$PWD/tool_policies.yaml",
    "--", "npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "$DIR"] } } }
JSON
echo "wrote mcp.json; your client runs: toolgate proxy --policy $PWD/tool_policies.yaml -- ${SERVER[*]}"
