import { useQueryClient } from "@tanstack/react-query";

import { useLiveSocket, type SocketState } from "../../api/liveSocket";
import { WS_CLOSE_NOT_FOUND } from "../../api/types";
import { chatKeys, chatSocketUrl, parseChatEvent, patchChat } from "./api";

/**
 * Keep ws/chats/{id}/ open while the chat is shown and patch the chat's cached detail with its
 * events. The feed sends no snapshot, so it counts as up when it opens, and a reopened one reads
 * the chat again: events sent meanwhile are lost.
 */
export function useChatLive(chatId: number): SocketState {
  const queryClient = useQueryClient();
  return useLiveSocket(chatSocketUrl(chatId, window.location), {
    onMessage: (data) => {
      const message = parseChatEvent(data);
      if (message) patchChat(queryClient, chatId, message);
      return false;
    },
    onResync: () => void queryClient.invalidateQueries({ queryKey: chatKeys.detail(chatId) }),
    upOn: "open",
    establishedOn: "open",
    refusedCodes: [WS_CLOSE_NOT_FOUND],
  });
}
