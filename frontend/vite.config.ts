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
    environment: "node",
    include: ["src/**/*.test.ts"],
    // Other processes share the machine's two cores.
    pool: "threads",
    maxWorkers: 1,
  },
});
