/*
 * Entrypoint of the images built by scripts/build_images_local.ts, where `deno compile` cannot run
 * (it downloads a Deno runtime that these build machines cannot reach): the image holds the `deno`
 * binary and the component's bundle (`deno task build`), and this static program, installed at the
 * Dockerfile's entrypoint path (/bin/s3-csi-driver, /bin/s3-csi-mounter), runs
 *
 *   DENO run --allow-all --no-config --no-lock --no-remote --no-code-cache \
 *       --v8-flags=V8_FLAGS BUNDLE ARGS...
 *
 * with the same V8 flags the Dockerfile bakes into the compiled binary. BUNDLE is the loader
 * `deno task build` writes (`<name>.js`), which runs the CommonJS bundle beside it (`<name>.cjs`):
 * Deno never analyses that bundle as a module (scripts/build.ts says why). The images have no shell,
 * hence a C program; it is built with `gcc -static`, so it needs nothing from the image. With
 * --no-code-cache and a bundle (no remote modules, no npm resolution) Deno writes no cache, so it
 * runs on a read-only root file system without a home directory (checked as uid 1000).
 *
 * Compile-time definitions (all required): DENO, BUNDLE, V8_FLAGS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !defined(DENO) || !defined(BUNDLE) || !defined(V8_FLAGS)
#error "define DENO, BUNDLE and V8_FLAGS"
#endif

int main(int argc, char **argv) {
  static const char *fixed[] = {
      DENO,          "run",           "--allow-all",          "--no-config", "--no-lock",
      "--no-remote", "--no-code-cache", "--v8-flags=" V8_FLAGS, BUNDLE,
  };
  const int nfixed = (int)(sizeof(fixed) / sizeof(fixed[0]));
  char **args = calloc((size_t)(nfixed + argc), sizeof(char *));
  if (args == NULL) {
    perror("s3-csi launcher: calloc");
    return 127;
  }
  for (int i = 0; i < nfixed; i++) args[i] = (char *)fixed[i];
  for (int i = 1; i < argc; i++) args[nfixed + i - 1] = argv[i];
  args[nfixed + argc - 1] = NULL;
  setenv("DENO_NO_UPDATE_CHECK", "1", 0);
  setenv("DENO_NO_PROMPT", "1", 0);
  execv(DENO, args);
  fprintf(stderr, "s3-csi launcher: cannot execute %s: ", DENO);
  perror(NULL);
  return 127;
}
