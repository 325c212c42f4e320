// Starts `stringdiag lsp` (the command in the setting stringdiag.command): diagnostics as you type
// for .diag, .rules and .deriv files; hover, go to definition and completion in .diag files. Highlighting is the TextMate
// grammar in syntaxes/, which needs no server.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("stringdiag").get("command");
  client = new LanguageClient(
    "stringdiag",
    "stringdiag",
    { command, args },
    { documentSelector: [{ scheme: "file", language: "diag", pattern: "**/*.{diag,rules,deriv}" }] },
  );
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
