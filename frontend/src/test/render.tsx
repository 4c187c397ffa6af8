/** Render a page as the app does (query client, router), in jsdom. */
import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { render, type RenderResult } from "@testing-library/react";
import type { ReactElement } from "react";
import { MemoryRouter, Route, Routes } from "react-router";

import { createQueryClient } from "../queryClient";

/**
 * `element` at `route` (a react-router pattern), the browser at `path`. The app's query
 * client, without retries: an error shows at once instead of after the retry delays.
 */
export function renderPage(
  element: ReactElement,
  { path = "/", route = "/" }: { path?: string; route?: string } = {},
): RenderResult & { queryClient: QueryClient } {
  const queryClient = createQueryClient();
  const defaults = queryClient.getDefaultOptions();
  queryClient.setDefaultOptions({ ...defaults, queries: { ...defaults.queries, retry: false } });
  const result = render(
    <QueryClientProvider client={queryClient}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path={route} element={element} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
  return { ...result, queryClient };
}
