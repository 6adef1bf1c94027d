/**
 * The one script of the web pages (served at /-/assets/cairn-<hash>.js). Every page works
 * without it; it only adds conveniences, each hooked on a data attribute:
 * - `select[data-autosubmit]`: changing it submits its form (branch switcher, filters).
 * - `pre[data-log-stream]`: a running job's log grows from server-sent events (`append` events
 *   carry text, `status` the job's status, shown in GitLab's words, `end` closes the stream).
 * - `button[data-copy]`: copies the text of the element it names.
 */
export const SCRIPT = `
(function () {
  'use strict';
  document.querySelectorAll('select[data-autosubmit]').forEach(function (select) {
    select.addEventListener('change', function () { if (select.form) select.form.submit(); });
  });
  document.querySelectorAll('button[data-copy]').forEach(function (button) {
    button.addEventListener('click', function () {
      var target = document.getElementById(button.getAttribute('data-copy'));
      if (!target || !navigator.clipboard) return;
      navigator.clipboard.writeText(target.value || target.textContent || '').then(function () {
        var label = button.textContent; button.textContent = 'Copied'; setTimeout(function () { button.textContent = label; }, 1500);
      });
    });
  });
  document.querySelectorAll('pre[data-log-stream]').forEach(function (pre) {
    if (!window.EventSource) return;
    var status = document.querySelector('[data-job-status]');
    var source = new EventSource(pre.getAttribute('data-log-stream'));
    source.addEventListener('append', function (event) {
      var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.appendChild(document.createTextNode(JSON.parse(event.data)));
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    });
    source.addEventListener('status', function (event) {
      if (!status) return;
      var value = JSON.parse(event.data);
      var words = { success: 'passed', scheduled: 'delayed', waiting_for_resource: 'waiting' };
      status.textContent = words[value] || value; status.className = 'badge ' + value;
    });
    source.addEventListener('end', function () { source.close(); pre.removeAttribute('aria-busy'); });
  });
})();
`;
