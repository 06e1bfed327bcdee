/**
 * Renders only the newest of a stream of inputs: one render at a time, and while one runs, later requests replace each
 * other, so a burst of N requests costs two renders (the one under way and the last), never N. Between two renders it
 * waits `gap(ms the last render took)`, leaving the page's main thread free for input: a render that takes long is
 * followed by a longer rest. A live run's diagram gets a new source at every task
 * status; a large plan takes the browser a second or more to lay out, and rendering every version made the page
 * unresponsive (clicks waited tens of seconds) on a 90-task run.
 */
export type LatestRenderer<In> = {
  /** Ask for `input` to be rendered; an older request not yet started is dropped. */
  request(input: In): void;
  /** No more renders start, and no more results are reported. */
  stop(): void;
};

export function latestRenderer<In, Out>(
  render: (input: In) => Promise<Out>,
  report: (result: { input: In; ok: true; value: Out } | { input: In; ok: false; error: unknown }) => void,
  {
    gap = () => 0,
    wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    now = () => performance.now(),
  }: { gap?: (lastRenderMs: number) => number; wait?: (ms: number) => Promise<void>; now?: () => number } = {},
): LatestRenderer<In> {
  let wanted: { input: In } | null = null;
  let busy = false;
  let stopped = false;

  const pump = async () => {
    busy = true;
    let last: number | null = null;
    while (wanted && !stopped) {
      const rest = last === null ? 0 : gap(last);
      if (rest > 0) await wait(rest);
      if (!wanted || stopped) break;
      const { input } = wanted;
      wanted = null;
      const started = now();
      try {
        const value = await render(input);
        if (!stopped) report({ input, ok: true, value });
      } catch (error) {
        if (!stopped) report({ input, ok: false, error });
      }
      last = now() - started;
    }
    busy = false;
  };

  return {
    request(input) {
      if (stopped) return;
      wanted = { input };
      if (!busy) void pump();
    },
    stop() {
      stopped = true;
      wanted = null;
    },
  };
}
