/**
 * The one style sheet of the web pages (served at /-/assets/cairn-<hash>.css, cached for good).
 * Plain and accessible: system fonts, visible focus, contrast in light and dark mode
 * (prefers-color-scheme), and a layout that folds to one column on a phone. The CSP allows no
 * inline style: pages use these classes, never a style attribute.
 */
export const STYLE = `
:root { color-scheme: light dark; --fg: #1f1e24; --muted: #626168; --line: #dcdcde; --bg: #fbfafd; --panel: #fff; --subtle: #f4f4f6;
  --brand: #1f75cb; --brand-dark: #1068bf; --link: #1068bf; --danger: #c91c00; --ok: #108548; --warn: #ab6100; --info: #1f75cb;
  --add-bg: #ecfdf0; --add-strong: #c7f0d2; --del-bg: #fbe9eb; --del-strong: #fac5cd; --hunk: #f0f0ff; --code-bg: #fafafa; --log-bg: #1f1e24; --log-fg: #ececef; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #ececef; --muted: #a4a3a8; --line: #434248; --bg: #18171d; --panel: #1f1e24; --subtle: #28272d;
    --brand: #428fdc; --brand-dark: #63a6e9; --link: #63a6e9; --danger: #f57f6c; --ok: #52b87a; --warn: #d99530; --info: #63a6e9;
    --add-bg: #0d2a18; --add-strong: #145c2e; --del-bg: #3b1418; --del-strong: #6e1d26; --hunk: #24243a; --code-bg: #1b1a20; --log-bg: #0f0e13; }
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", Ubuntu, sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--link); text-decoration: none; }
a:hover { text-decoration: underline; }
:focus-visible { outline: 2px solid var(--brand); outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: .5rem; background: var(--panel); padding: .3rem .6rem; z-index: 10; }
header.top { background: var(--panel); border-bottom: 1px solid var(--line); padding: .45rem 1rem; display: flex; align-items: center; gap: 1rem; flex-wrap: wrap; }
header.top .brand { font-weight: 700; font-size: 1.05rem; color: var(--fg); display: flex; align-items: center; gap: .4rem; }
header.top .brand svg { width: 1.5rem; height: 1.5rem; }
header.top nav { display: flex; gap: .9rem; flex-wrap: wrap; }
header.top nav a { color: var(--fg); }
header.top .me { margin-left: auto; display: flex; align-items: center; gap: .6rem; }
header.top .me form { margin: 0; }
.layout { display: flex; min-height: calc(100vh - 3rem); }
nav.side { width: 13rem; flex: none; border-right: 1px solid var(--line); background: var(--panel); padding: .75rem 0; }
nav.side .ctx { padding: .25rem 1rem .75rem; font-weight: 600; word-break: break-word; }
nav.side a { display: block; padding: .35rem 1rem; color: var(--fg); }
nav.side a[aria-current="page"] { background: var(--subtle); font-weight: 600; border-left: 3px solid var(--brand); padding-left: calc(1rem - 3px); }
nav.side .count { float: right; color: var(--muted); font-size: .8rem; }
main { flex: 1; min-width: 0; padding: 1rem 1.5rem 3rem; max-width: 90rem; }
main.narrow { max-width: 52rem; margin: 0 auto; }
@media (max-width: 760px) {
  .layout { display: block; }
  nav.side { width: auto; border-right: 0; border-bottom: 1px solid var(--line); padding: .25rem .5rem; display: flex; overflow-x: auto; white-space: nowrap; }
  nav.side .ctx { display: none; }
  nav.side a { padding: .4rem .6rem; }
  nav.side a[aria-current="page"] { border-left: 0; border-bottom: 3px solid var(--brand); padding-left: .6rem; }
  main { padding: .75rem; }
  .hide-sm { display: none; }
}
h1 { font-size: 1.45rem; margin: .25rem 0 .75rem; word-break: break-word; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .6rem; }
h3 { font-size: 1rem; margin: 1rem 0 .5rem; }
p { margin: .4rem 0 .9rem; }
.muted { color: var(--muted); }
.small { font-size: .85rem; }
.breadcrumbs { color: var(--muted); font-size: .9rem; margin-bottom: .25rem; word-break: break-word; }
.breadcrumbs a { color: var(--muted); }
.row { display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; }
.spread { display: flex; gap: .6rem; align-items: center; justify-content: space-between; flex-wrap: wrap; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: .4rem; padding: 1rem 1.25rem; margin: 0 0 1rem; }
.card.flush { padding: 0; overflow: hidden; }
.card > header { padding: .55rem 1rem; border-bottom: 1px solid var(--line); background: var(--subtle); display: flex; gap: .6rem; align-items: center; justify-content: space-between; flex-wrap: wrap; }
ul.list { list-style: none; margin: 0; padding: 0; background: var(--panel); border: 1px solid var(--line); border-radius: .4rem; }
ul.list > li { padding: .65rem 1rem; border-bottom: 1px solid var(--line); display: flex; gap: .75rem; align-items: flex-start; justify-content: space-between; }
ul.list > li:last-child { border-bottom: 0; }
ul.list .title { font-weight: 600; }
ul.list .meta { color: var(--muted); font-size: .85rem; }
.empty { padding: 2rem 1rem; text-align: center; color: var(--muted); }
table { width: 100%; border-collapse: collapse; background: var(--panel); }
th, td { text-align: left; padding: .5rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; color: var(--muted); font-weight: 600; }
.tabs { display: flex; gap: .25rem; border-bottom: 1px solid var(--line); margin: .5rem 0 1rem; overflow-x: auto; }
.tabs a { padding: .45rem .8rem; color: var(--fg); border-bottom: 3px solid transparent; white-space: nowrap; }
.tabs a[aria-current="page"] { border-bottom-color: var(--brand); font-weight: 600; }
.tabs .count { color: var(--muted); font-size: .8rem; margin-left: .25rem; }
label { display: block; font-weight: 600; margin: .8rem 0 .3rem; }
input[type=text], input[type=password], input[type=email], input[type=date], input[type=search], input[type=number], select, textarea {
  font: inherit; padding: .45rem .6rem; border: 1px solid #89888d; border-radius: .25rem; background: var(--panel); color: var(--fg); max-width: 100%; }
input[type=text], input[type=password], input[type=email], textarea { width: 100%; }
textarea { min-height: 6rem; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9rem; }
.check { display: flex; gap: .5rem; align-items: center; font-weight: normal; margin: .4rem 0; }
button, .button { display: inline-block; font: inherit; font-weight: 600; padding: .4rem .9rem; border-radius: .25rem; border: 1px solid var(--brand-dark);
  background: var(--brand); color: #fff; cursor: pointer; text-decoration: none; line-height: 1.4; }
button:hover, .button:hover { background: var(--brand-dark); text-decoration: none; }
button.secondary, .button.secondary { background: var(--panel); color: var(--fg); border-color: #89888d; }
button.secondary:hover, .button.secondary:hover { background: var(--subtle); }
button.danger, .button.danger { background: var(--panel); color: var(--danger); border-color: var(--danger); }
button.ok, .button.ok { background: var(--ok); border-color: var(--ok); }
button:disabled { opacity: .55; cursor: not-allowed; }
button.small, .button.small { padding: .15rem .5rem; font-size: .85rem; }
form.inline { display: inline; margin: 0; }
.filters { display: flex; gap: .5rem; flex-wrap: wrap; align-items: end; margin: .5rem 0 1rem; }
.filters label { margin: 0; font-size: .8rem; }
.alert { border-radius: .25rem; padding: .65rem 1rem; margin: 0 0 1rem; border: 1px solid; }
.alert.error { background: var(--del-bg); border-color: var(--danger); }
.alert.notice { background: var(--add-bg); border-color: var(--ok); }
.alert.warn { border-color: var(--warn); }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 1rem; font-size: .8rem; font-weight: 600; border: 1px solid var(--line); background: var(--subtle); color: var(--fg); white-space: nowrap; }
.badge.opened, .badge.success, .badge.passed, .badge.active { color: var(--ok); border-color: var(--ok); }
.badge.closed, .badge.failed, .badge.blocked { color: var(--danger); border-color: var(--danger); }
.badge.merged { color: var(--info); border-color: var(--info); }
.badge.running, .badge.pending, .badge.created, .badge.preparing, .badge.waiting_for_resource, .badge.scheduled { color: var(--info); border-color: var(--info); }
.badge.canceled, .badge.skipped, .badge.manual { color: var(--muted); }
.badge.warn { color: var(--warn); border-color: var(--warn); }
code, kbd, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .88rem; }
.sha { font-family: ui-monospace, monospace; font-size: .85rem; }
.avatar { width: 1.5rem; height: 1.5rem; border-radius: 50%; background: var(--subtle); display: inline-flex; align-items: center; justify-content: center; font-size: .75rem; font-weight: 700; vertical-align: middle; border: 1px solid var(--line); }
.md { overflow-wrap: anywhere; }
.md img { max-width: 100%; }
.md pre { background: var(--code-bg); border: 1px solid var(--line); padding: .75rem; overflow-x: auto; border-radius: .25rem; }
.md code { background: var(--subtle); padding: .05rem .25rem; border-radius: .2rem; }
.md pre code { background: none; padding: 0; }
.md table { width: auto; } .md th, .md td { border: 1px solid var(--line); }
.md blockquote { margin: 0 0 1rem; padding: 0 1rem; border-left: 3px solid var(--line); color: var(--muted); }
.md .task-list-item { list-style: none; } .md .task-list-item input { margin: 0 .35rem 0 -1.3rem; }
/* file and blob views */
table.tree td { padding: .4rem .75rem; } table.tree td.name { width: 40%; word-break: break-all; }
.icon { display: inline-block; width: 1.1rem; color: var(--muted); text-align: center; }
.code { overflow-x: auto; background: var(--code-bg); }
table.code { border-collapse: collapse; width: 100%; background: var(--code-bg); font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .85rem; line-height: 1.45; }
table.code td { border: 0; padding: 0 .75rem; white-space: pre; vertical-align: top; }
table.code td.ln { width: 1%; text-align: right; color: var(--muted); user-select: none; padding: 0 .5rem; border-right: 1px solid var(--line); }
table.code td.ln a { color: var(--muted); }
table.code tr:target td { background: var(--hunk); }
table.code td.blame { width: 1%; white-space: nowrap; font-family: system-ui, sans-serif; font-size: .8rem; border-right: 1px solid var(--line); padding: 0 .6rem; max-width: 22rem; overflow: hidden; text-overflow: ellipsis; }
/* diffs */
.diff-file { margin: 0 0 1rem; }
.diff-file > header { position: sticky; top: 0; z-index: 1; }
table.diff { border-collapse: collapse; width: 100%; table-layout: fixed; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .82rem; line-height: 1.45; background: var(--panel); }
table.diff td { border: 0; padding: 0 .5rem; vertical-align: top; white-space: pre-wrap; overflow-wrap: anywhere; }
table.diff td.ln { width: 3.2rem; text-align: right; color: var(--muted); user-select: none; white-space: nowrap; }
table.diff td.ln a { color: var(--muted); }
table.diff tr.hunk td { background: var(--hunk); color: var(--muted); }
table.diff td.add, table.diff tr.add td { background: var(--add-bg); }
table.diff td.del, table.diff tr.del td { background: var(--del-bg); }
table.diff td.add.ln, table.diff tr.add td.ln { background: var(--add-strong); }
table.diff td.del.ln, table.diff tr.del td.ln { background: var(--del-strong); }
table.diff td.empty { background: var(--subtle); }
table.diff tr.notes td { background: var(--bg); white-space: normal; font-family: system-ui, sans-serif; font-size: .9rem; padding: .5rem 1rem; }
.added { color: var(--ok); font-weight: 600; } .removed { color: var(--danger); font-weight: 600; }
table.diff col.ln { width: 3.2rem; }
table.diff .comment-here { visibility: hidden; }
table.diff tr:hover .comment-here, table.diff .comment-here:focus { visibility: visible; }
/* notes and discussions */
.discussion { border: 1px solid var(--line); border-radius: .4rem; background: var(--panel); margin: 0 0 .75rem; }
.discussion.resolved { opacity: .85; }
.note { padding: .6rem 1rem; border-bottom: 1px solid var(--line); }
.note:last-child { border-bottom: 0; }
.note .who { font-weight: 600; }
.note.system { color: var(--muted); font-size: .9rem; border: 0; padding: .3rem 1rem; }
details > summary { cursor: pointer; }
/* discussions component (src/web/components/notes.ts) */
ul.notes, ul.timeline, ul.awards { list-style: none; margin: 0; padding: 0; }
ul.timeline { margin: 0 0 .5rem; }
.note-head { display: flex; gap: .4rem; align-items: baseline; flex-wrap: wrap; }
.note-body { margin-top: .3rem; } .note-body > :last-child, .inline-md > :last-child { margin-bottom: 0; }
.inline-md, .inline-md > p { display: inline; margin: 0; }
ul.awards { display: flex; gap: .4rem; margin-top: .3rem; } ul.awards li { border: 1px solid var(--line); border-radius: 1rem; padding: 0 .5rem; font-size: .8rem; }
.discussion-foot { padding: .5rem 1rem; border-top: 1px solid var(--line); background: var(--subtle); }
.discussion-status { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin-bottom: .3rem; }
details.reply textarea { min-height: 4rem; }
.form-actions { margin-top: .5rem; }
.comment-form { margin-top: 1rem; }
/* issues and snippets (src/web/pages/issues.ts, snippets.ts) */
.issuable { display: grid; grid-template-columns: minmax(0, 1fr) 16rem; gap: 1.5rem; align-items: start; }
@media (max-width: 960px) { .issuable { grid-template-columns: minmax(0, 1fr); } }
.issue-head { border-bottom: 1px solid var(--line); padding-bottom: .6rem; margin-bottom: .6rem; }
dl.side-facts { margin: 0; } dl.side-facts dt { font-weight: 600; font-size: .85rem; margin-top: .75rem; } dl.side-facts dt:first-child { margin-top: 0; } dl.side-facts dd { margin: .2rem 0 0; }
.badge.label { font-weight: 500; margin-right: .2rem; }
.pagination { justify-content: center; margin: 1rem 0; }
.filters input[type=text], .filters input[type=search] { width: 11rem; }
.snippet-file { margin: 0 0 1rem; }
fieldset.plain { border: 0; padding: 0; margin: .8rem 0 0; } fieldset.plain legend { font-weight: 600; padding: 0; }
textarea.tall { min-height: 14rem; }
/* pipelines and jobs */
.stages { display: flex; gap: 1.5rem; overflow-x: auto; padding: .5rem 0 1rem; }
.stage { min-width: 12rem; }
.stage h3 { font-size: .85rem; text-transform: capitalize; color: var(--muted); margin: 0 0 .5rem; }
.stage ul { list-style: none; margin: 0; padding: 0; }
.stage li { border: 1px solid var(--line); border-radius: 1.2rem; padding: .3rem .8rem; margin: 0 0 .5rem; background: var(--panel); display: flex; justify-content: space-between; gap: .5rem; }
pre.log { background: var(--log-bg); color: var(--log-fg); padding: 1rem; border-radius: .4rem; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; font-size: .82rem; line-height: 1.4; min-height: 8rem; max-height: 80vh; overflow-y: auto; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
.card-title { margin: 0; font-size: 1rem; }
.pad { padding: 1rem 1.25rem; }
.grow { flex: 1; }
.mt0 { margin-top: 0; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
/* CI pages (pipelines, jobs) and settings (members, protected branches) */
.scroll-x { overflow-x: auto; position: relative; }
.mini-stages { display: inline-flex; gap: .25rem; flex-wrap: wrap; }
.stage h3 .badge { text-transform: none; }
.stage li .badge { flex: none; }
.job-page { display: grid; grid-template-columns: minmax(0, 1fr) 18rem; gap: 1rem; align-items: start; }
.job-page .log-head { margin: 0 0 .4rem; }
@media (max-width: 960px) { .job-page { grid-template-columns: minmax(0, 1fr); } }
form.member-edit { flex-wrap: nowrap; gap: .35rem; }
form.member-edit select, form.member-edit input { padding: .2rem .35rem; }
/* browsing: ref switcher, path, file header, blame, lists (pages/files.ts, branches.ts, dashboard.ts) */
.repo-bar { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; margin: 0 0 .75rem; }
form.switcher { margin: 0; gap: .35rem; flex-wrap: nowrap; } form.switcher select { max-width: 16rem; }
.path-crumbs { font-size: 1rem; word-break: break-all; }
table.tree td.name .icon { margin-right: .4rem; } .icon svg { width: 1rem; height: 1rem; vertical-align: -.15rem; }
.repo-bar .clone { margin-left: auto; gap: .35rem; flex-wrap: nowrap; } .repo-bar .clone label { margin: 0; font-size: .85rem; }
.repo-bar .clone input { width: 22rem; padding: .25rem .5rem; font-size: .82rem; }
.avatar.project { border-radius: .3rem; width: 2rem; height: 2rem; font-size: .95rem; flex: none; }
ul.list > li > .avatar { margin-top: .1rem; }
.card.file > header { position: sticky; top: 0; z-index: 1; }
.file-actions { gap: .35rem; }
nav.toggle { display: inline-flex; border: 1px solid #89888d; border-radius: .25rem; overflow: hidden; }
nav.toggle a { padding: .15rem .5rem; font-size: .85rem; color: var(--fg); }
nav.toggle a[aria-current="page"] { background: var(--subtle); font-weight: 600; }
.blob-image { text-align: center; } .blob-image img { max-width: 100%; }
table.code td.ln + td { width: 100%; }
table.code.blame tr.blame-start td { border-top: 1px solid var(--line); }
table.code.blame td.blame { white-space: normal; min-width: 12rem; max-width: 22rem; padding: .15rem .6rem; }
table.code.blame td.blame .title { display: block; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; color: var(--fg); }
.last-commit .title { font-weight: 600; color: var(--fg); }
pre.readme-text { white-space: pre-wrap; margin: 0; }
.profile .avatar { width: 3.5rem; height: 3.5rem; font-size: 1.5rem; }
@media (max-width: 760px) { .repo-bar .clone { margin-left: 0; width: 100%; } .repo-bar .clone input { width: auto; flex: 1; min-width: 0; }
  table.code.blame td.blame { min-width: 8rem; max-width: 10rem; } form.switcher select { max-width: 10rem; } }
/* commits and compare */
.commit-day { margin: 0 0 1rem; }
.commit-day-title { font-size: .95rem; margin: 1rem 0 .4rem; }
ul.commits .commit-text { min-width: 0; overflow-wrap: anywhere; }
ul.commits .commit-ids { flex: none; }
.commit-more { margin: .15rem 0; }
.commit-more > summary { display: inline-block; list-style: none; padding: 0 .4rem; border: 1px solid var(--line); border-radius: .2rem; font-size: .8rem; line-height: 1.3; }
.commit-more > summary::-webkit-details-marker { display: none; }
pre.commit-description { white-space: pre-wrap; overflow-wrap: anywhere; margin: .5rem 0; font-size: .85rem; }
.commit-title { margin: .5rem 0; overflow-wrap: anywhere; }
.diff-bar { margin: 1rem 0 .5rem; }
.diff-bar h2 { margin: 0; }
.compare-fields { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: 0 1rem; }
fieldset.compare-mode { border: 0; padding: 0; margin: .8rem 0; }
fieldset.compare-mode legend { font-weight: 600; padding: 0; }
/* syntax highlighting (highlight.js class names) */
.hljs-comment, .hljs-quote { color: #6a737d; font-style: italic; }
.hljs-keyword, .hljs-selector-tag, .hljs-literal, .hljs-doctag, .hljs-meta .hljs-keyword { color: #a626a4; }
.hljs-string, .hljs-regexp, .hljs-addition, .hljs-attribute, .hljs-meta .hljs-string { color: #217a3c; }
.hljs-number, .hljs-symbol, .hljs-bullet, .hljs-variable.constant_ { color: #b35900; }
.hljs-title, .hljs-title.function_, .hljs-section { color: #1859c2; }
.hljs-title.class_, .hljs-type, .hljs-built_in { color: #9a5b00; }
.hljs-attr, .hljs-variable, .hljs-template-variable, .hljs-name, .hljs-selector-id, .hljs-selector-class { color: #b31d28; }
.hljs-meta { color: #6a737d; } .hljs-deletion { color: #b31d28; } .hljs-emphasis { font-style: italic; } .hljs-strong { font-weight: 700; }
@media (prefers-color-scheme: dark) {
  .hljs-comment, .hljs-quote, .hljs-meta { color: #8b949e; }
  .hljs-keyword, .hljs-selector-tag, .hljs-literal, .hljs-doctag, .hljs-meta .hljs-keyword { color: #ff7b72; }
  .hljs-string, .hljs-regexp, .hljs-addition, .hljs-attribute, .hljs-meta .hljs-string { color: #a5d6ff; }
  .hljs-number, .hljs-symbol, .hljs-bullet, .hljs-variable.constant_ { color: #79c0ff; }
  .hljs-title, .hljs-title.function_, .hljs-section { color: #d2a8ff; }
  .hljs-title.class_, .hljs-type, .hljs-built_in { color: #ffa657; }
  .hljs-attr, .hljs-variable, .hljs-template-variable, .hljs-name, .hljs-selector-id, .hljs-selector-class { color: #7ee787; }
  .hljs-deletion { color: #ffa198; }
}
/* merge requests (src/web/pages/merge_requests.ts) */
.mr-head h1 .muted { font-weight: 400; }
.mr-head .branch { background: var(--subtle); border-radius: .2rem; padding: 0 .3rem; overflow-wrap: anywhere; }
.merge-widget .widget-row { padding: .5rem 0; border-bottom: 1px solid var(--line); }
.merge-widget .widget-row:last-child { border-bottom: 0; padding-bottom: 0; }
.merge-widget .widget-row:first-child { padding-top: 0; }
ul.blockers { margin: .3rem 0 0; padding-left: 1.2rem; }
.state-actions { margin: 0 0 1rem; }
.diff-thread { margin: 0 0 .75rem; } .diff-thread .discussion { margin: 0; }
.thread-context { margin: 0 0 .3rem; color: var(--muted); }
.diff-thread.outdated .discussion { opacity: .8; }
.diff-note-form .comment-form { margin-top: .25rem; }
`;
