/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// Deployment contract with Django: `npm run build` writes dist/index.html and
// dist/assets/*. Django answers every non-API path with index.html and serves
// /assets/* from dist/assets/, so the app lives at the site root.
const backend = process.env.BARREL_DEV_BACKEND ?? "http://127.0.0.1:8000";

export default defineConfig({
  base: "/",
  plugins: [react()],
  build: {
    outDir: "dist",
    assetsDir: "assets",
    emptyOutDir: true,
    sourcemap: true,
  },
  server: {
    proxy: {
      "/api": { target: backend, changeOrigin: false },
      "/ws": { target: backend, ws: true, changeOrigin: false },
    },
  },
  test: {
    // Other processes share the machine's two cores.
    pool: "threads",
    maxWorkers: 1,
    projects: [
      // Pure helpers, in node, each file in a fresh module graph.
      { extends: true, test: { name: "unit", include: ["src/**/*.test.ts"], environment: "node" } },
      // Components with Testing Library. One jsdom for all their files (isolate: false) halves
      // the run: each file unmounts, unstubs its globals and mocks only what it imports.
      {
        extends: true,
        test: { name: "dom", include: ["src/**/*.test.tsx"], environment: "jsdom", isolate: false },
      },
    ],
  },
});
