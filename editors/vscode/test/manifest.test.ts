// The manifest and the code agree: every contributed command is registered,
// menus and keybindings name contributed commands, and none collides with
// the server's own commands (which vscode-languageclient registers).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.join(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const source = fs.readFileSync(path.join(root, 'src', 'extension.ts'), 'utf8');

test('contributed commands are registered and distinct from the server commands', () => {
  const ids: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command);
  assert.ok(ids.includes('maia.askSelection'));
  for (const id of ids) {
    assert.ok(source.includes(`registerCommand('${id}'`), `${id} is registered`);
    assert.ok(!['maia.ask', 'maia.cancel', 'maia.newSession'].includes(id), `${id} collides`);
  }
  const referenced = [
    ...manifest.contributes.menus['editor/context'].map((m: { command: string }) => m.command),
    ...manifest.contributes.keybindings.map((k: { command: string }) => k.command),
  ];
  for (const id of referenced) {
    assert.ok(ids.includes(id), `${id} is contributed`);
  }
});

test('the entry point is the compiled extension', () => {
  assert.equal(manifest.main, './out/src/extension.js');
  assert.ok(fs.existsSync(path.join(root, manifest.main)), 'compiled before testing');
});
