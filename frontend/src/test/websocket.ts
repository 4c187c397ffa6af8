/**
 * A WebSocket stand-in for the run and eval pages' live feeds: the test plays the server, opening the
 * socket, sending it messages and closing it.
 */
import { act } from "@testing-library/react";

import type { EvalWsMessage, WsMessage } from "../api/types";

export class FakeWebSocket {
  /** Every socket the page opened, oldest first. */
  static opened: FakeWebSocket[] = [];

  onopen: ((event: Event) => void) | null = null;
  onmessage: ((event: MessageEvent) => void) | null = null;
  onclose: ((event: CloseEvent) => void) | null = null;
  /** The code the page closed with, or null while it keeps the socket. */
  closedWith: number | null = null;

  constructor(readonly url: string) {
    FakeWebSocket.opened.push(this);
  }

  /** The newest socket; the test fails if the page opened none. */
  static latest(): FakeWebSocket {
    const socket = FakeWebSocket.opened.at(-1);
    if (!socket) throw new Error("the page opened no websocket");
    return socket;
  }

  close(code = 1000): void {
    this.closedWith = code;
  }

  // ------------------------------------------------ the server's side

  accept(): void {
    act(() => this.onopen?.(new Event("open")));
  }

  send(message: WsMessage | EvalWsMessage): void {
    act(() => this.onmessage?.(new MessageEvent("message", { data: JSON.stringify(message) })));
  }

  drop(code: number): void {
    act(() => this.onclose?.(new CloseEvent("close", { code })));
  }
}
