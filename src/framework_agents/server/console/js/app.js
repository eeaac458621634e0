// The console's entry point: hash routes (#/t/<thread>, #/compare/<thread>,
// #/memories/<namespace>), the threads list, the token dialog and what the server offers
// (api/info). Everything it shows comes from the server's public endpoints.

import { api } from "./api.js";
import { openCompare } from "./compare.js";
import { clear, h } from "./dom.js";
import { openMemories } from "./memories.js";
import { newThreadId, openThread } from "./thread.js";
import { installThreadList, loadThreads, markCurrent } from "./threads.js";
import { askToken, installTokenDialog, showError } from "./ui.js";

function route() {
  if (location.hash && !location.hash.startsWith("#/")) return undefined; // an in-page anchor
  const hash = location.hash.replace(/^#\/?/, "");
  const [view, ...rest] = hash.split("/");
  const id = rest.length ? decodeURIComponent(rest.join("/")) : "";
  if (view === "t" && id) return openThread(id);
  if (view === "compare" && id) return openCompare(id);
  const memoriesLink = document.getElementById("memories-link");
  if (view === "memories") {
    memoriesLink.setAttribute("aria-current", "page");
    return info.then((server) => openMemories(id, server.bank));
  }
  memoriesLink.removeAttribute("aria-current");
  markCurrent(null);
  const main = clear(document.getElementById("main"));
  main.append(
    h(
      "section",
      { class: "welcome", id: "welcome" },
      h("h2", {}, "No thread open"),
      h("p", {}, "Pick a thread on the left, or start a new one."),
    ),
  );
  return undefined;
}

let info = Promise.resolve({ bank: false });

/** What the server offers (api/info); a server that does not say offers no bank. */
function loadInfo() {
  info = api.info().then(
    (body) => ({ bank: Boolean(body && body.bank) }),
    () => ({ bank: false }),
  );
  return info.then((server) => {
    document.getElementById("memories-link").hidden = !server.bank;
  });
}

function boot() {
  installTokenDialog();
  installThreadList();
  document.querySelector(".skip-link").addEventListener("click", (event) => {
    event.preventDefault(); // the hash names routes, not anchors
    document.getElementById("main").focus();
  });
  document.getElementById("token-button").addEventListener("click", async () => {
    if (await askToken("Enter the server's access token.")) {
      await loadThreads();
      await loadInfo();
      route();
    }
  });
  document.getElementById("new-thread").addEventListener("click", () => {
    location.hash = `#/t/${newThreadId()}`;
  });
  window.addEventListener("hashchange", () => {
    Promise.resolve(route()).catch(showError);
  });
  window.addEventListener("unhandledrejection", (event) => showError(event.reason));
  window.addEventListener("error", (event) => showError(event.error || event.message));
  loadThreads()
    .then(() => loadInfo())
    .then(() => route());
}

boot();
