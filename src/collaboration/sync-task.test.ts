import { describe, expect, it } from "vitest";
import { failTask, finishTask, jobStatus, newTask, record, summarize, type TaskResult } from "./sync-task.js";

function task(status: TaskResult["status"]): TaskResult {
  return { ...newTask("p", "https://peer.example", "receive"), status };
}

describe("sync task results", () => {
  it("records each item as succeeded (with its action) or failed (with its reason)", () => {
    const t = newTask("host", "https://host.example", "receive");
    record(t, [
      { id: "a", title: "A", ok: true, action: "created" },
      { id: "b", title: "B", ok: true },
      { id: "c", title: "C", ok: false, reason: "too large" },
      { id: "d", title: "D", ok: false },
    ]);
    expect(t.succeeded).toEqual([
      { id: "a", title: "A", action: "created" },
      { id: "b", title: "B" },
    ]);
    expect(t.failed).toEqual([
      { id: "c", title: "C", reason: "too large" },
      { id: "d", title: "D", reason: "failed" },
    ]);
  });

  it("finishes a task with failed or unprocessed items as completed with failures", () => {
    const clean = newTask("host", "u", "send");
    expect(finishTask(clean).status).toBe("completed");
    const withFailure = newTask("host", "u", "send");
    withFailure.failed.push({ id: "x", title: "X", reason: "r" });
    expect(finishTask(withFailure).status).toBe("completed_with_failures");
    const withWaiting = newTask("host", "u", "send");
    withWaiting.notProcessed.push({ id: "y", title: "Y", reason: "budget" });
    expect(finishTask(withWaiting).status).toBe("completed_with_failures");
  });

  it("keeps a failed task failed, with the error's message", () => {
    const t = newTask("host", "u", "send");
    t.failed.push({ id: "x", title: "X", reason: "r" });
    failTask(t, new Error("the host could not be reached"));
    expect(finishTask(t)).toMatchObject({ status: "failed", error: "the host could not be reached" });
  });

  it("fails a job only when every task failed", () => {
    expect(jobStatus([task("completed")])).toBe("completed");
    expect(jobStatus([task("completed"), task("completed")])).toBe("completed");
    expect(jobStatus([task("completed"), task("completed_with_failures")])).toBe("completed_with_failures");
    expect(jobStatus([task("completed"), task("failed")])).toBe("completed_with_failures");
    expect(jobStatus([task("failed"), task("failed")])).toBe("failed");
  });

  it("summarizes each direction with its counts and error", () => {
    const received = newTask("host", "https://host.example", "receive");
    record(received, [
      { id: "a", title: "A", ok: true },
      { id: "b", title: "B", ok: true },
      { id: "c", title: "C", ok: false },
    ]);
    const sent = newTask("host", "https://host.example", "send");
    sent.notProcessed.push({ id: "d", title: "D" }, { id: "e", title: "E" });
    failTask(sent, new Error("boom"));
    expect(summarize([received, sent])).toBe(
      "from https://host.example: 2 succeeded, 1 failed, 0 not processed; " +
        "to https://host.example: 0 succeeded, 0 failed, 2 not processed (boom)",
    );
  });
});
