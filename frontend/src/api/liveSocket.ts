import { useEffect, useRef, useState } from "react";

/** Seconds between reconnects double from 1 up to 30. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
}

/**
 * Backoff across reconnects. A connection counts as good only once the server
 * has said where things stand (its snapshot, or its accepting the socket where it
 * sends none): a server that accepts and closes at once (1013, "try again later",
 * while its Redis is down) keeps the delay growing instead of being asked every second.
 */
export class ReconnectBackoff {
  private failures = 0;

  established(): void {
    this.failures = 0;
  }

  nextDelayMs(): number {
    const delay = reconnectDelayMs(this.failures);
    this.failures += 1;
    return delay;
  }
}

/** "up": live (see `upOn`); "refused": the server said no for good (not found, not yours). */
export type SocketState = "connecting" | "up" | "closed" | "refused";

export interface LiveSocketOptions {
  /** A new connection begins (per-connection state, such as an event counter, starts afresh). */
  onConnect?(): void;
  /** One message; true when it is the server's snapshot (it says where things stand). */
  onMessage(data: unknown): boolean;
  /** Refetch what messages sent while the socket was down would have patched. */
  onResync(): void;
  /** The socket is up when it opens, or only once its snapshot came (until then a page polls). */
  upOn: "open" | "snapshot";
  /** When a reconnect resyncs and the backoff resets: at the snapshot, or at open for a feed
   * that sends none (then a server closing at once refetches every attempt). */
  establishedOn: "open" | "snapshot";
  /** Close codes that end the feed for good. */
  refusedCodes: readonly number[];
  /** A close after which nothing more will come (a finished run's): no reconnect. */
  isFinal?(event: CloseEvent): boolean;
}

/**
 * Keep a websocket to `url` open while the component is mounted: messages go to
 * `onMessage` (which patches the query cache), reconnects back off, and after a
 * reconnect `onResync` refetches what was missed. The options are read when used,
 * so a page may pass a new object each render.
 */
export function useLiveSocket(url: string, options: LiveSocketOptions): SocketState {
  const [state, setState] = useState<SocketState>("connecting");
  const latest = useRef(options);
  latest.current = options;

  useEffect(() => {
    let socket: WebSocket | null = null;
    let stopped = false;
    let everEstablished = false;
    let retryTimer: number | undefined;
    const backoff = new ReconnectBackoff();
    const establish = () => {
      if (everEstablished) latest.current.onResync();
      everEstablished = true;
      backoff.established();
    };

    const connect = () => {
      setState("connecting");
      latest.current.onConnect?.();
      const ws = new WebSocket(url);
      socket = ws;
      ws.onopen = () => {
        if (latest.current.upOn === "open") setState("up");
        if (latest.current.establishedOn === "open") establish();
      };
      ws.onmessage = (event: MessageEvent) => {
        if (!latest.current.onMessage(event.data)) return;
        if (latest.current.establishedOn === "snapshot") establish();
        if (latest.current.upOn === "snapshot") setState("up");
      };
      ws.onclose = (event: CloseEvent) => {
        if (stopped) return;
        const { refusedCodes, isFinal } = latest.current;
        if (refusedCodes.includes(event.code)) {
          setState("refused");
          return;
        }
        setState("closed");
        if (isFinal?.(event)) return;
        retryTimer = window.setTimeout(connect, backoff.nextDelayMs());
      };
    };

    connect();
    return () => {
      stopped = true;
      window.clearTimeout(retryTimer);
      socket?.close(1000);
    };
  }, [url]);

  return state;
}
