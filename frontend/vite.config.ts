import { defineConfig } from 'vite';

// The build is embedded into the Go binary (//go:embed all:frontend/dist):
// relative asset paths, no source maps, one small bundle.
export default defineConfig({
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2020',
    sourcemap: false,
    chunkSizeWarningLimit: 800,
  },
});
