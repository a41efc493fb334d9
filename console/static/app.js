// The console's entry point: picks the page by path. Pages are plain
// links between full page loads; each page reads its state from the URL.
import { forgetKey, updateKeyButton } from './api.js';
import { showError } from './dom.js';
import { comparePage } from './compare.js';
import { hierarchiesPage } from './hierarchies.js';
import { mcpServersPage } from './mcp.js';
import { memoryPage } from './memory.js';
import { runsPage } from './runs.js';
import { runPage } from './run.js';
import { schedulesPage } from './schedules.js';
import { webhooksPage } from './webhooks.js';

async function main() {
  updateKeyButton();
  document.getElementById('forget-key').addEventListener('click', () => {
    forgetKey();
    location.reload();
  });
  const root = document.getElementById('main');
  const path = location.pathname.replace(/\/+$/, '') || '/';
  const pages = { '/': 'hierarchies', '/runs': 'runs', '/mcp-servers': 'mcp-servers', '/schedules': 'schedules', '/webhooks': 'webhooks', '/compare': 'compare', '/memory': 'memory' };
  document.body.dataset.page = pages[path] || 'run';
  const nav = document.getElementById('nav-' + (pages[path] || 'runs'));
  if (nav) nav.classList.add('current');
  if (path === '/') await hierarchiesPage(root);
  else if (path === '/runs') await runsPage(root);
  else if (path === '/mcp-servers') await mcpServersPage(root);
  else if (path === '/schedules') await schedulesPage(root);
  else if (path === '/webhooks') await webhooksPage(root);
  else if (path === '/compare') await comparePage(root);
  else if (path === '/memory') await memoryPage(root);
  else if (path.startsWith('/runs/')) await runPage(root, decodeURIComponent(path.slice('/runs/'.length)));
  document.body.dataset.ready = 'true';
}

main().catch(showError);
