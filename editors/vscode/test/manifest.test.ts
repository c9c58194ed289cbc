// The manifest and the code agree: every contributed command is registered,
// menus and keybindings name contributed commands, and none collides with
// the server's own commands (which vscode-languageclient registers); the
// panel's view is contributed in its own container and the bundles exist.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.join(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const source = ['extension.ts', 'review/editor.ts'].map((f) => fs.readFileSync(path.join(root, 'src', f), 'utf8')).join('\n');
const view = fs.readFileSync(path.join(root, 'src', 'panel', 'view.ts'), 'utf8');

test('contributed commands are registered and distinct from the server commands', () => {
  const ids: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command);
  assert.ok(ids.includes('maia.askSelection'));
  for (const id of ids) {
    assert.ok(source.includes(`registerCommand('${id}'`), `${id} is registered`);
    assert.ok(!['maia.ask', 'maia.cancel', 'maia.newSession'].includes(id), `${id} collides`);
  }
  const menus = manifest.contributes.menus as Record<string, { command: string }[]>;
  const referenced = [
    ...Object.values(menus).flatMap((items) => items.map((m) => m.command)),
    ...manifest.contributes.keybindings.map((k: { command: string }) => k.command),
  ];
  for (const id of referenced) {
    assert.ok(ids.includes(id), `${id} is contributed`);
  }
});

test('the panel is a webview view in its own activity-bar container', () => {
  const containers = manifest.contributes.viewsContainers.activitybar;
  assert.deepEqual(
    containers.map((c: { id: string; title: string }) => [c.id, c.title]),
    [['maia', 'MAIA']],
  );
  assert.ok(fs.existsSync(path.join(root, containers[0].icon)), 'the container icon ships');
  const views = manifest.contributes.views.maia;
  assert.equal(views[0].type, 'webview');
  assert.ok(view.includes(`VIEW_ID = '${views[0].id}'`), 'the provider serves the contributed view');
  const focus = manifest.contributes.keybindings.find((k: { command: string }) => k.command === 'maia.focusInput');
  assert.deepEqual([focus.key, focus.mac], ['ctrl+alt+m', 'cmd+alt+m']);
  const keys = manifest.contributes.keybindings.map((k: { key: string; when?: string }) => `${k.key}|${k.when ?? ''}`);
  assert.equal(new Set(keys).size, keys.length, 'no two bindings on the same key and context');
  assert.ok(manifest.contributes.menus['explorer/context'].some((m: { command: string }) => m.command === 'maia.addFile'));
  assert.ok(manifest.contributes.menus['editor/context'].some((m: { command: string }) => m.command === 'maia.addSelection'));
});

test('the entry point and the webview script are built', () => {
  assert.equal(manifest.main, './out/extension.js');
  assert.ok(fs.existsSync(path.join(root, manifest.main)), 'bundled before testing');
  assert.ok(fs.existsSync(path.join(root, 'out', 'webview', 'panel.js')), 'webview bundle');
  assert.ok(fs.existsSync(path.join(root, 'media', 'panel.css')));
  const bundle = fs.readFileSync(path.join(root, manifest.main), 'utf8');
  assert.ok(/require\("vscode"\)/.test(bundle), 'vscode stays external');
});

test('the extension bundle never reads `navigator` (VS Code logs PendingMigrationError for it)', () => {
  const bundle = fs.readFileSync(path.join(root, manifest.main), 'utf8');
  assert.doesNotMatch(bundle, /\bnavigator\b/);
});

test('the packaged README is found whatever its case (vsce ships it as readme.md)', () => {
  const notices = fs.readFileSync(path.join(root, 'src', 'notices.ts'), 'utf8');
  assert.ok(notices.includes('findReadme('), 'How to install looks the README up');
  assert.ok(!view.includes("'README.md'"), 'no hard-coded README.md');
});
