// smllm's OpenCode plugin (cli-and-harnesses.md §5, §6, §6a), written by
// `smllm harness install opencode`. It maps OpenCode's events to smllm's hooks:
//   session.created               -> `smllm harness hook opencode session-start`; its text is
//                                    appended to the first system message of every request of
//                                    that session but the title request
//   tool.execute.after (smllm's   -> session-start again (a bound session's view by then), as
//   MCP tool, a shell running       at each user message and at the plugin's own re-prompt: the
//   smllm)                          next request's system text waits for that answer
//   a user chat.message           -> user-prompt-submit (not the plugin's own re-prompt)
//   session.idle / status idle    -> stop; a block is sent back as a prompt, so the agent goes
//                                    on, with stop_hook_active true on the idle that follows
//                                    that re-prompt when no user message came between
// Sessions with a parentID (subagents) are left alone, but a session's stop waits until the
// subagents it started are idle. Idle events are deduplicated, and no stop runs after an abort
// or an error. No dependencies: a plugin that fails to load is
// dropped without a word, so it logs once when it loads.
import { spawn } from "node:child_process"

// the smllm executable: the install puts its absolute path here as a JSON string
const SMLLM_BIN = typeof __SMLLM__ === "string" ? __SMLLM__ : "smllm"
// a hook that runs longer than this is killed and counts as a quiet answer
const HOOK_TIMEOUT_MS = 30000
// the system prompt of OpenCode's title generator, whose request gets no smllm text
const TITLE_PROMPT = "You are a title generator"
// OpenCode names an MCP tool `<server>_<tool>`: the install's server `smllm`, its tool `smllm`
const SMLLM_TOOL = "smllm_smllm"
// a shell command that runs smllm (`smllm fire …`, a path ending in /smllm)
const SMLLM_COMMAND = /(^|[\s/;&|('"`])smllm(\.exe)?(?=[\s'"`;&|)]|$)/

function hookAnswer(hook, payload, warn) {
  return new Promise((resolve) => {
    let child
    try {
      child = spawn(SMLLM_BIN, ["harness", "hook", "opencode", hook], {
        stdio: ["pipe", "pipe", "pipe"],
        windowsHide: true,
      })
    } catch (error) {
      warn(hook, String(error))
      resolve(null)
      return
    }
    let out = ""
    let err = ""
    let done = false
    const finish = (value) => {
      if (!done) {
        done = true
        clearTimeout(timer)
        resolve(value)
      }
    }
    const timer = setTimeout(() => {
      warn(hook, `no answer within ${HOOK_TIMEOUT_MS / 1000} s`)
      child.kill("SIGKILL")
      finish(null)
    }, HOOK_TIMEOUT_MS)
    child.stdout.setEncoding("utf8")
    child.stderr.setEncoding("utf8")
    child.stdout.on("data", (chunk) => (out += chunk))
    child.stderr.on("data", (chunk) => (err += chunk))
    child.on("error", (error) => {
      warn(hook, String(error))
      finish(null)
    })
    child.on("close", (code) => {
      if (code !== 0) {
        warn(hook, err.trim() || `exit ${code}`)
        finish(null)
        return
      }
      try {
        const answer = JSON.parse(out)
        finish(answer && typeof answer === "object" ? answer : null)
      } catch {
        warn(hook, "its answer is not JSON")
        finish(null)
      }
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

function textOf(parts) {
  if (!Array.isArray(parts)) return ""
  return parts
    .filter((part) => part && part.type === "text" && typeof part.text === "string")
    .map((part) => part.text)
    .join("\n")
}

async function server(ctx) {
  const client = ctx && ctx.client
  const directory = (ctx && (ctx.directory || ctx.worktree)) || process.cwd()
  const warned = new Set()
  const warn = (hook, message) => {
    if (warned.has(hook)) return // once per hook: a broken smllm mustn't flood the TUI
    warned.add(hook)
    console.error(`smllm: the ${hook} hook failed: ${message}`)
  }
  console.error(`smllm: OpenCode plugin loaded (${SMLLM_BIN})`)

  // per OpenCode session id
  const children = new Set() // subagent sessions: left alone
  const parents = new Map() // subagent session -> its parent session
  const running = new Set() // subagent sessions whose turn runs now
  const waiting = new Set() // sessions whose idle came while a subagent of theirs ran
  const starts = new Map() // the session-start text, as a promise of string or null
  const busy = new Map() // true while a turn runs: an idle counts only after busy
  const failed = new Set() // the turn ended in an abort or an error: no stop
  const reprompts = new Map() // the text of the plugin's own re-prompt, until chat.message sees it
  const continuing = new Set() // a re-prompt was sent, and no user message came since

  const payload = (sessionID, more) => ({ session_id: sessionID, cwd: directory, ...more })

  const ask = (sessionID) =>
    hookAnswer("session-start", payload(sessionID, {}), warn).then((answer) => {
      const text = answer && answer.hookSpecificOutput && answer.hookSpecificOutput.additionalContext
      return typeof text === "string" && text ? text : null
    })

  const start = (sessionID) => {
    if (!starts.has(sessionID)) starts.set(sessionID, ask(sessionID))
    return starts.get(sessionID)
  }

  // the session's view now, for the system text of the requests that follow: the promise is in
  // place at once, so the next transform waits for this answer, never reading the view before
  // it. No answer (a failure, a session busy with another call) keeps the text it had
  const refresh = (sessionID) => {
    const before = starts.get(sessionID) || Promise.resolve(null)
    const now = ask(sessionID).then((text) => text || before)
    starts.set(sessionID, now)
    return now
  }

  const reprompt = async (sessionID, text) => {
    if (!client || !client.session) return
    const send = client.session.promptAsync || client.session.prompt
    if (typeof send !== "function") return
    reprompts.set(sessionID, text)
    continuing.add(sessionID)
    refresh(sessionID) // the re-prompt's request shows the view as the stop left it
    try {
      const result = await send.call(client.session, {
        path: { id: sessionID },
        body: { parts: [{ type: "text", text }] },
      })
      if (result && result.error) warn("stop", `the re-prompt failed: ${JSON.stringify(result.error)}`)
    } catch (error) {
      reprompts.delete(sessionID)
      warn("stop", `the re-prompt failed: ${error}`)
    }
  }

  // OpenCode reports a session idle while subagents it started still run: its stop waits for
  // the last of them, so the agent isn't re-prompted in the middle of its own work
  const subagentsRun = (sessionID) => {
    for (const child of running) if (parents.get(child) === sessionID) return true
    return false
  }

  const childStatus = async (childID, status) => {
    if (status === "busy" || status === "retry") {
      running.add(childID)
      return
    }
    if (status !== "idle") return
    running.delete(childID)
    const parentID = parents.get(childID)
    if (parentID && waiting.has(parentID) && !subagentsRun(parentID)) {
      waiting.delete(parentID)
      await idle(parentID)
    }
  }

  const idle = async (sessionID) => {
    if (busy.get(sessionID) !== true) return // a repeated idle, or one with no turn before it
    if (subagentsRun(sessionID)) {
      waiting.add(sessionID) // decided when its last subagent goes idle
      return
    }
    busy.set(sessionID, false)
    if (failed.has(sessionID)) {
      failed.delete(sessionID)
      return
    }
    const active = continuing.has(sessionID)
    const answer = await hookAnswer("stop", payload(sessionID, { stop_hook_active: active }), warn)
    if (!answer || answer.decision !== "block" || typeof answer.reason !== "string") return
    if (busy.get(sessionID) === true) return // a new turn began meanwhile: it decides
    await reprompt(sessionID, answer.reason)
  }

  const event = async ({ event }) => {
    if (!event || typeof event.type !== "string") return
    const props = event.properties || {}
    if (event.type === "session.created") {
      const info = props.info || {}
      const sessionID = info.id || props.sessionID
      if (typeof sessionID !== "string") return
      if (info.parentID) {
        children.add(sessionID)
        parents.set(sessionID, info.parentID)
        return
      }
      await start(sessionID)
      return
    }
    const sessionID = props.sessionID || (props.info && props.info.sessionID)
    if (typeof sessionID !== "string") return
    if (children.has(sessionID)) {
      if (event.type === "session.status") await childStatus(sessionID, props.status && props.status.type)
      else if (event.type === "session.idle") await childStatus(sessionID, "idle")
      return
    }
    if (event.type === "session.status") {
      const status = props.status && props.status.type
      if (status === "busy" || status === "retry") busy.set(sessionID, true)
      else if (status === "idle") await idle(sessionID)
    } else if (event.type === "session.idle") {
      await idle(sessionID)
    } else if (event.type === "session.error") {
      failed.add(sessionID)
    } else if (event.type === "message.updated") {
      const info = props.info || {}
      if (info.role === "assistant" && info.error) failed.add(sessionID)
    }
  }

  const chatMessage = async (input, output) => {
    const sessionID = input && input.sessionID
    if (typeof sessionID !== "string" || children.has(sessionID)) return
    busy.set(sessionID, true)
    failed.delete(sessionID)
    const text = textOf(output && output.parts)
    if (reprompts.has(sessionID) && reprompts.get(sessionID) === text) {
      reprompts.delete(sessionID) // the plugin's own re-prompt, not the user
      return
    }
    continuing.delete(sessionID)
    reprompts.delete(sessionID)
    const known = starts.has(sessionID)
    if (!known) await start(sessionID) // a session OpenCode had before the plugin loaded binds now
    await hookAnswer("user-prompt-submit", payload(sessionID, { prompt: text }), warn)
    // the system text goes out again with every request, unlike a client's session-start
    // context, which stays behind in the history: the view is asked for afresh (the user may
    // have fired events in a shell since), so the agent never reads a stale one
    if (known) await refresh(sessionID)
  }

  const toolAfter = async (input) => {
    const sessionID = input && input.sessionID
    if (typeof sessionID !== "string" || children.has(sessionID)) return
    const args = (input && input.args) || {}
    const shell = input.tool === "bash" && typeof args.command === "string"
    if (input.tool !== SMLLM_TOOL && !(shell && SMLLM_COMMAND.test(args.command))) return
    // not awaited: the tool's result needn't wait, the next request's transform does
    refresh(sessionID)
  }

  const systemTransform = async (input, output) => {
    const sessionID = input && input.sessionID
    if (typeof sessionID !== "string" || children.has(sessionID)) return
    if (!output || !Array.isArray(output.system)) return
    if (output.system.some((part) => typeof part === "string" && part.includes(TITLE_PROMPT))) return
    const text = await start(sessionID)
    if (!text) return
    if (output.system.length === 0) output.system.push(text)
    else output.system[0] = `${output.system[0]}\n\n${text}`
  }

  return {
    event,
    "chat.message": chatMessage,
    "experimental.chat.system.transform": systemTransform,
    "tool.execute.after": toolAfter,
  }
}

export default { id: "smllm", server }
