// A tool's question (an MCP server's elicitation): a form built from the requested schema.
// The schema is the protocol's restricted form: a flat object whose properties are strings
// (minLength, maxLength, format, enum or titled oneOf), numbers or integers (minimum,
// maximum), booleans, or arrays of enumerated strings (items.enum or titled items.anyOf).
// The page checks what it can before sending; the server checks the answer again.

import { h, uid } from "./dom.js";

const INPUT_TYPES = { email: "email", uri: "url", date: "date" };

/** `[{value, title}]` of a string property's choices (enum, or titled oneOf), or null. */
export function choicesOf(prop) {
  if (Array.isArray(prop.enum)) {
    const names = Array.isArray(prop.enumNames) ? prop.enumNames : [];
    return prop.enum.map((value, i) => ({ value: String(value), title: String(names[i] ?? value) }));
  }
  const titled = prop.oneOf || prop.anyOf;
  if (Array.isArray(titled)) return titled.map((o) => ({ value: String(o.const), title: String(o.title ?? o.const) }));
  return null;
}

function bounds(low, high, unit) {
  if (low !== undefined && high !== undefined) return `${low} to ${high}${unit}`;
  if (low !== undefined) return `at least ${low}${unit}`;
  if (high !== undefined) return `at most ${high}${unit}`;
  return "";
}

/** One field: its element, the control to focus, and read() -> {value} | {skip} | {error}. */
function field(name, schemaProp, required, given) {
  // A value given before (an answer the server refused) is shown again, else the default.
  const prop = given === undefined ? schemaProp : { ...schemaProp, default: given };
  const id = uid(`elicit-${name}`);
  const hintId = `${id}-hint`;
  const errId = `${id}-error`;
  const title = prop.title || name;
  const hints = [];
  if (prop.description) hints.push(prop.description);
  const error = h("p", { id: errId, class: "field-error", hidden: true });
  const kind = prop.type;
  let control;
  let read;
  let box;
  if (kind === "boolean") {
    control = h("input", { id, name, type: "checkbox", "aria-describedby": errId });
    control.checked = prop.default === true;
    read = () => ({ value: control.checked });
    box = h("div", { class: "row check" }, control, h("label", { for: id }, title));
  } else if (kind === "array") {
    const choices = choicesOf(prop.items || {}) || [];
    const boxes = choices.map((choice) => {
      const boxId = uid(`elicit-${name}`);
      const input = h("input", { id: boxId, type: "checkbox", value: choice.value });
      input.checked = Array.isArray(prop.default) && prop.default.includes(choice.value);
      return h("div", { class: "row check" }, input, h("label", { for: boxId }, choice.title));
    });
    const span = bounds(prop.minItems, prop.maxItems, " choices");
    if (span) hints.push(`Pick ${span}.`);
    control = boxes.length ? boxes[0].querySelector("input") : null;
    read = () => {
      const picked = boxes.map((b) => b.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
      if (!picked.length && !required) return { skip: true };
      if (prop.minItems !== undefined && picked.length < prop.minItems) return { error: `pick ${span}` };
      if (prop.maxItems !== undefined && picked.length > prop.maxItems) return { error: `pick ${span}` };
      return { value: picked };
    };
    box = h(
      "fieldset",
      { class: "choices", "aria-describedby": errId },
      h("legend", {}, title, required ? h("span", { class: "required" }, " (required)") : null),
      boxes,
    );
  } else {
    const choices = kind === "string" ? choicesOf(prop) : null;
    if (choices) {
      control = h(
        "select",
        { id, name, required },
        h("option", { value: "" }, required ? "Choose..." : "(none)"),
        choices.map((c) => h("option", { value: c.value }, c.title)),
      );
      if (typeof prop.default === "string") control.value = prop.default;
      read = () => (control.value === "" ? (required ? { error: "choose one" } : { skip: true }) : { value: control.value });
    } else if (kind === "number" || kind === "integer") {
      control = h("input", {
        id,
        name,
        type: "number",
        inputmode: kind === "integer" ? "numeric" : "decimal",
        step: kind === "integer" ? "1" : "any",
        min: prop.minimum,
        max: prop.maximum,
        required,
      });
      if (typeof prop.default === "number") control.value = String(prop.default);
      const span = bounds(prop.minimum, prop.maximum, "");
      if (span) hints.push(`${kind === "integer" ? "A whole number" : "A number"}, ${span}.`);
      read = () => {
        const text = control.value.trim();
        if (text === "") {
          if (control.validity && control.validity.badInput) return { error: "must be a number" };
          return required ? { error: "is required" } : { skip: true };
        }
        const value = Number(text);
        if (!Number.isFinite(value)) return { error: "must be a number" };
        if (kind === "integer" && !Number.isInteger(value)) return { error: "must be a whole number" };
        if ((prop.minimum !== undefined && value < prop.minimum) || (prop.maximum !== undefined && value > prop.maximum)) {
          return { error: `must be ${span}` };
        }
        return { value };
      };
    } else {
      const format = prop.format;
      control = h("input", {
        id,
        name,
        type: INPUT_TYPES[format] || "text",
        minlength: prop.minLength,
        maxlength: prop.maxLength,
        placeholder: format === "date-time" ? "2026-12-06T10:00:00Z" : undefined,
        autocomplete: "off",
        required,
      });
      if (typeof prop.default === "string") control.value = prop.default;
      const span = bounds(prop.minLength, prop.maxLength, " characters");
      if (span) hints.push(`${span[0].toUpperCase()}${span.slice(1)}.`);
      if (format === "date-time") hints.push("A date and time (ISO 8601).");
      read = () => {
        const value = control.value;
        if (value === "") return required ? { error: "is required" } : { skip: true };
        if ((prop.minLength !== undefined && value.length < prop.minLength) || (prop.maxLength !== undefined && value.length > prop.maxLength)) {
          return { error: `must have ${span}` };
        }
        if (control.validity && control.validity.typeMismatch) return { error: `must be a valid ${format}` };
        return { value };
      };
    }
    const described = [hints.length ? hintId : null, errId].filter(Boolean).join(" ");
    control.setAttribute("aria-describedby", described);
    box = h("div", {}, h("label", { for: id }, title, required ? h("span", { class: "required" }, " (required)") : null), control);
  }
  const hint = hints.length ? h("p", { id: hintId, class: "hint muted" }, hints.join(" ")) : null;
  const element = h("div", { class: "elicit-field", "data-field": name }, box, hint, error);
  const settled = () => {
    error.hidden = true;
    if (control) control.removeAttribute("aria-invalid");
  };
  element.addEventListener("input", settled); // a field being corrected is no longer marked
  element.addEventListener("change", settled);
  return {
    name,
    title,
    control,
    element,
    read() {
      const got = read();
      if (got.error) {
        error.textContent = `${title} ${got.error}.`;
        error.hidden = false;
        if (control) control.setAttribute("aria-invalid", "true");
      } else {
        settled();
      }
      return got;
    },
  };
}

/**
 * The fields of `schema` (filled with `values` where given) and a reader of the whole answer.
 * read() -> {content} when every field is valid, else {invalid: the first bad field}.
 */
export function buildForm(schema, values = {}) {
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = Object.entries(properties).map(([name, prop]) => field(name, prop || {}, required.has(name), values[name]));
  return {
    fields,
    elements: fields.map((f) => f.element),
    read() {
      const content = {};
      let invalid = null;
      for (const f of fields) {
        const got = f.read();
        if (got.error) invalid = invalid || f;
        else if (!got.skip) content[f.name] = got.value;
      }
      return invalid ? { invalid } : { content };
    },
  };
}
