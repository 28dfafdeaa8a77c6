// vista serve: open a citation's source panel, fetch a source event's panel, ask a question, load similar patients.
// Server HTML is autoescaped; it is parsed into an inert <template> (no script runs) before it is shown.
(function () {
  "use strict";
  var exported = document.body.getAttribute("data-exported") === "1";
  var panel = document.getElementById("source-panel");

  function parsed(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html;
    return holder.content;
  }

  function show(content) {
    if (!panel) { return; }
    panel.replaceChildren(content);
    panel.scrollIntoView({block: "nearest"});
  }

  function load(url, options, into) {
    return fetch(url, Object.assign({credentials: "same-origin"}, options || {}))
      .then(function (r) { return r.text(); })
      .then(function (html) { into(parsed(html)); })
      .catch(function (err) { into(document.createTextNode("Request failed: " + err)); });
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest("[data-cite], [data-source]");
    if (!target) { return; }
    var cite = target.getAttribute("data-cite");
    if (cite) {
      var template = document.getElementById(cite);
      if (template) { event.preventDefault(); show(template.content.cloneNode(true)); }
      return;
    }
    if (!exported) { event.preventDefault(); load(target.getAttribute("data-source"), null, show); }
  });

  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.target.matches && event.target.matches("g[data-cite]")) {
      event.target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    }
  });

  var form = document.getElementById("ask-form");
  if (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var answer = document.getElementById("answer");
      answer.textContent = "Asking…";
      load(form.getAttribute("action"), {method: "POST", body: new URLSearchParams(new FormData(form))},
           function (content) { answer.replaceChildren(content); });
    });
  }

  var similar = document.getElementById("similar");
  if (similar && similar.getAttribute("data-src")) {
    load(similar.getAttribute("data-src"), null, function (content) { similar.replaceChildren(content); });
  }
}());
