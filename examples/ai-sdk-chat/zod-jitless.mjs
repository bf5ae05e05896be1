// Imported first by browser-bundle.mjs, so it runs before zod's modules: zod (the `ai` package's schemas) probes
// `new Function` to compile its parsers, which the page's Content-Security-Policy forbids (no eval), so the probe
// would report a violation. zod reads its config from this global when it loads; jitless parses without eval.
globalThis.__zod_globalConfig ??= {};
globalThis.__zod_globalConfig.jitless = true;
