// Command-line options of the research scripts: `--name value` pairs taken
// out of an argument list, so that what is left is the scripts' positional
// arguments.

/** The value after `--name` in `argv` (removing both), or `fallback` where it is absent. */
export function takeOption(argv, name, fallback) {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = argv[i + 1];
  argv.splice(i, 2);
  return v;
}
