// The web page's stand-in for VS Code's webview API: the panel's script
// (`webview/`) posts its messages through `acquireVsCodeApi()`; here they go
// to the page's own host (`host.ts`), which registers itself once started.
// Imported before the panel, so the global exists when the panel loads.
import type { ToHost } from '../src/panel/protocol';

let handler: ((m: ToHost) => void) | undefined;
const early: ToHost[] = [];

(globalThis as { acquireVsCodeApi?: unknown }).acquireVsCodeApi = () => ({
  postMessage(m: ToHost): void {
    if (handler) {
      handler(m);
    } else {
      early.push(m);
    }
  },
});

/** Routes the panel's messages to `h`, those sent before it first. */
export function onPanelMessage(h: (m: ToHost) => void): void {
  handler = h;
  for (const m of early.splice(0)) {
    h(m);
  }
}
