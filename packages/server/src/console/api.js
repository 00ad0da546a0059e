// The approval API, with the signed-in token.
import { state } from "./state.js"

class ApiError extends Error {
  constructor(status, message) {
    super(message)
    this.status = status
  }
}

/** A request to the approval API with the token; fails with an ApiError carrying the server's message. */
export async function api(method, path, body, signal = state.run?.signal) {
  const headers = { authorization: `Bearer ${state.token}` }
  if (body !== undefined) headers["content-type"] = "application/json"
  let response
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store"
    })
  } catch (error) {
    if (signal?.aborted) throw error
    throw new ApiError(0, `The server could not be reached (${error.message})`)
  }
  const text = await response.text()
  let json
  try {
    json = text === "" ? undefined : JSON.parse(text)
  } catch {
    json = undefined
  }
  if (!response.ok) {
    throw new ApiError(response.status, json?.message ?? (text || `${response.status} ${response.statusText}`))
  }
  return { json, response }
}

export const enc = encodeURIComponent
