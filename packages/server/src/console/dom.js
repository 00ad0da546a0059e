// Building the page: everything from the server goes in with text nodes and attributes, never
// innerHTML, since tool arguments come from agents and may carry markup.

export const $ = (id) => document.getElementById(id)

/** An element with attributes and children (strings become text nodes). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value)
    else if (value === true) node.setAttribute(name, "")
    else node.setAttribute(name, String(value))
  }
  node.append(...children.filter((child) => child !== undefined && child !== null))
  return node
}
