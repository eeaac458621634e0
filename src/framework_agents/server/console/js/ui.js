// Page-wide pieces: the error banner, the token dialog, and withAuth(), which asks for the
// token once when the server answers 401 and then retries the call.

import { ApiError, getToken, setToken } from "./api.js";

const $ = (id) => document.getElementById(id);

export function showError(err) {
  const banner = $("error-banner");
  const code = err instanceof ApiError ? err.code : "CONSOLE_ERROR";
  banner.querySelector(".error-code").textContent = code;
  banner.querySelector(".error-message").textContent = err && err.message ? err.message : String(err);
  banner.dataset.code = code;
  banner.hidden = false;
}

export function clearError() {
  $("error-banner").hidden = true;
}

export function updateAuthStatus() {
  const has = Boolean(getToken());
  $("auth-status").textContent = has ? "Token set for this tab" : "";
  $("token-button").textContent = has ? "Change token" : "Set token";
}

let pending = null;

/** Open the token dialog; resolves true when a token was saved, false when cancelled. */
export function askToken(reason) {
  if (pending) return pending;
  const dialog = $("token-dialog");
  const input = $("token-input");
  $("token-reason").textContent = reason || "Enter the server's access token.";
  input.value = "";
  const opener = document.activeElement;
  pending = new Promise((resolve) => {
    const done = (saved) => {
      dialog.removeEventListener("close", onClose);
      pending = null;
      updateAuthStatus();
      if (opener && opener.focus && document.contains(opener)) opener.focus();
      resolve(saved);
    };
    const onClose = () => {
      const value = dialog.returnValue === "save" ? input.value.trim() : "";
      if (value) setToken(value);
      done(Boolean(value));
    };
    dialog.addEventListener("close", onClose);
  });
  dialog.returnValue = "";
  dialog.showModal();
  input.focus();
  return pending;
}

export function installTokenDialog() {
  const dialog = $("token-dialog");
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (!$("token-input").value.trim()) return;
    dialog.close("save");
  });
  $("token-cancel").addEventListener("click", () => dialog.close("cancel"));
  $("error-dismiss").addEventListener("click", clearError);
  updateAuthStatus();
}

/** Run fn(); on a 401 ask for the token (once per refusal) and run it again. */
export async function withAuth(fn) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 401 || attempt > 2) throw err;
      const reason = getToken()
        ? `The server refused the token (${err.code}: ${err.message}). Enter the right one.`
        : "This server needs an access token.";
      const saved = await askToken(reason);
      if (!saved) throw err;
    }
  }
}
