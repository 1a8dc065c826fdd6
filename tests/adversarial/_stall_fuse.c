// A hostile FUSE server for the adversarial tier (built at test time with the C compiler): it
// answers INIT and GETATTR (a root directory), LOOKUP (no such entry) and STATX (ENOSYS), and never
// answers anything else — an OPENDIR, the node plugin's health probe, waits forever.
//   _stall_fuse <fd>     serve the FUSE connection on fd until it ends
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct in_header { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid; uint16_t extlen, pad; };
struct out_header { uint32_t len; int32_t error; uint64_t unique; };
struct attr { uint64_t ino, size, blocks, atime, mtime, ctime; uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags; };

static void reply(int fd, uint64_t unique, int error, const void *body, size_t n) {
  char buf[512];
  struct out_header h = { (uint32_t)(sizeof h + n), error, unique };
  memcpy(buf, &h, sizeof h);
  if (n) memcpy(buf + sizeof h, body, n);
  (void)!write(fd, buf, sizeof h + n);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  int fd = atoi(argv[1]);
  static char buf[(1 << 20) + 8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) { if (errno == EINTR || errno == ENOENT || errno == EAGAIN) continue; return 0; }
    struct in_header *in = (void *)buf;
    char *arg = buf + sizeof *in;
    switch (in->opcode) {
    case 26: { // INIT
      uint32_t major = ((uint32_t *)arg)[0], minor = ((uint32_t *)arg)[1], readahead = ((uint32_t *)arg)[2];
      char out[64] = {0};
      uint32_t *o = (uint32_t *)out;
      o[0] = major; o[1] = minor < 31 ? minor : 31; o[2] = readahead; o[3] = 0;
      ((uint32_t *)(out + 20))[0] = 65536; // max_write
      reply(fd, in->unique, 0, out, sizeof out);
      break;
    }
    case 3: { // GETATTR
      char out[16 + sizeof(struct attr)] = {0};
      ((uint64_t *)out)[0] = 1; // attr_valid: 1 s
      struct attr *a = (void *)(out + 16);
      a->ino = in->nodeid; a->mode = 040755; a->nlink = 2; a->blksize = 4096;
      reply(fd, in->unique, 0, out, sizeof out);
      break;
    }
    case 1: reply(fd, in->unique, -ENOENT, 0, 0); break; // LOOKUP
    case 52: reply(fd, in->unique, -ENOSYS, 0, 0); break; // STATX: the kernel falls back to GETATTR
    case 2: case 42: case 36: break;                      // FORGET, BATCH_FORGET, INTERRUPT
    default: break;                                       // OPENDIR and the rest: never
    }
  }
}
