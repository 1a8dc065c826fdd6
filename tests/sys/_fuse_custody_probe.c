// Kernel facts behind the custody of FUSE connections (tests/sys/fuse_custody_test.ts builds and
// runs this): a server S1 serves a connection and dies with one request read and unanswered; a
// second server S2 then serves the same connection without INIT. Usage (root):
//   fuse_custody_probe <mount dir> resend|clone read|lookup
// resend: S1 and S2 serve the mounting file itself (custody keeps it open), S2 first sends
//         FUSE_NOTIFY_RESEND; clone: each serves its own FUSE_DEV_IOC_CLONE of it.
// read: the request in flight is a READ; lookup: a LOOKUP. Prints "RESULT ok" or "RESULT <errno>"
// for what the caller of the request in flight got.
#define _GNU_SOURCE
#include <linux/fuse.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7
#endif
#ifndef FUSE_DEV_IOC_CLONE
#define FUSE_DEV_IOC_CLONE _IOR(229, 0, uint32_t)
#endif
static const char *dir;
static int lookupMode;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void reply(int fd, uint64_t unique, int err, const void *p, size_t n) {
  char buf[8192]; struct fuse_out_header h = {sizeof h + n, err, unique};
  memcpy(buf,&h,sizeof h); if(n) memcpy(buf+sizeof h,p,n);
  if (write(fd, buf, sizeof h + n) < 0) fprintf(stderr, "[srv %d] reply write unique=%llx: %s\n", getpid(), (unsigned long long)unique, strerror(errno));
}
static void attr(struct fuse_attr *a, uint64_t ino) {
  memset(a,0,sizeof *a); a->ino=ino; a->mode = ino==1? (S_IFDIR|0755):(S_IFREG|0644); a->nlink=1; a->size= ino==1?0:8192; a->blksize=4096;
}
// serve: name tags the server; hang_off: offset whose READ is never answered (simulated in-flight)
static void serve(int fd, const char *name, int do_init, long hang_off, int resend) {
  static char buf[(1<<20)+4096];
  if (resend) { struct fuse_out_header h = {sizeof h, FUSE_NOTIFY_RESEND, 0};
    if (write(fd,&h,sizeof h)<0) fprintf(stderr,"[%s] NOTIFY_RESEND: %s\n",name,strerror(errno)); else fprintf(stderr,"[%s] NOTIFY_RESEND sent\n",name); }
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) { if (errno==EINTR||errno==ENOENT) continue; fprintf(stderr,"[%s] read: %s\n",name,strerror(errno)); exit(0);}
    struct fuse_in_header *in = (void*)buf; void *arg = buf + sizeof *in;
    fprintf(stderr,"[%s] op=%u unique=%llx node=%llu\n",name,in->opcode,(unsigned long long)in->unique,(unsigned long long)in->nodeid);
    switch (in->opcode) {
    case FUSE_INIT: { struct fuse_init_in *ii = arg; struct fuse_init_out o; memset(&o,0,sizeof o);
      o.major=7; o.minor= ii->minor < 36 ? ii->minor : 36; o.max_readahead=ii->max_readahead; o.max_write=65536; o.flags = FUSE_ASYNC_READ;
      fprintf(stderr,"[%s] INIT kernel %u.%u flags=%x flags2=%x\n",name,ii->major,ii->minor,ii->flags, ii->flags2);
      reply(fd,in->unique,0,&o,sizeof o); break; }
    case FUSE_LOOKUP: { struct fuse_entry_out e; memset(&e,0,sizeof e);
      if (!strcmp(arg,"g") && hang_off>=0) { fprintf(stderr,"[%s] holding LOOKUP g\n",name); break; }
      if (strcmp(arg,"f") && strcmp(arg,"g")) { reply(fd,in->unique,-ENOENT,0,0); break; }
      e.nodeid=2; e.entry_valid=100; e.attr_valid=100; attr(&e.attr,2); reply(fd,in->unique,0,&e,sizeof e); break; }
    case FUSE_GETATTR: { struct fuse_attr_out a; memset(&a,0,sizeof a); a.attr_valid=100; attr(&a.attr,in->nodeid); reply(fd,in->unique,0,&a,sizeof a); break; }
    case FUSE_OPEN: case FUSE_OPENDIR: { struct fuse_open_out o; memset(&o,0,sizeof o); o.fh=7; reply(fd,in->unique,0,&o,sizeof o); break; }
    case FUSE_READ: { struct fuse_read_in *r = arg;
      if ((long)r->offset == hang_off) { fprintf(stderr,"[%s] holding READ at %llu unanswered\n",name,(unsigned long long)r->offset); break; }
      char d[4096]; memset(d, r->offset==0?'a':'b', sizeof d); size_t len = r->size < 4096 ? r->size : 4096; reply(fd,in->unique,0,d,len); break; }
    case FUSE_FORGET: case FUSE_BATCH_FORGET: break;
    case FUSE_INTERRUPT: break;
    default: reply(fd,in->unique, (in->opcode==FUSE_FLUSH||in->opcode==FUSE_RELEASE||in->opcode==FUSE_RELEASEDIR)?0:-ENOSYS,0,0);
    }
  }
}
static int do_mount(int fd) {
  char opts[256]; snprintf(opts,sizeof opts,"fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other",fd);
  return mount("probe", dir, "fuse.probe", MS_NOSUID|MS_NODEV, opts);
}
// reader: read 4096 bytes at offset 4096 from dir/f; prints result
static pid_t reader(const char *tag) {
  pid_t p = fork(); if (p) return p;
  char path[256];
  if (lookupMode) { snprintf(path,sizeof path,"%s/g",dir); struct stat st; double t=now(); int r=stat(path,&st); fprintf(stderr,"[%s] stat g after %.2fs: %s\n",tag,now()-t,r?strerror(errno):"ok"); printf("RESULT %s\n", r ? strerrorname_np(errno) : "ok"); exit(r?1:0);}  
  snprintf(path,sizeof path,"%s/f",dir); int fd = open(path,O_RDONLY);
  if (fd<0) { fprintf(stderr,"[%s] open: %s\n",tag,strerror(errno)); exit(2);}  
  char b[4096]; double t=now(); ssize_t n = pread(fd,b,sizeof b,4096);
  if (n<0) { fprintf(stderr,"[%s] pread after %.2fs: ERROR %s\n",tag,now()-t,strerror(errno)); printf("RESULT %s\n", strerrorname_np(errno)); exit(1);}  
  fprintf(stderr,"[%s] pread after %.2fs: %zd bytes '%c'\n",tag,now()-t,n,b[0]); printf("RESULT ok\n"); exit(0);
}
static void stat_root(const char *tag){ struct stat st; double t=now(); int r=stat(dir,&st); fprintf(stderr,"[%s] stat root: %s (%.2fs)\n",tag,r?strerror(errno):"ok",now()-t);}
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s <dir> resend|clone read|lookup\n", argv[0]); return 2; }
  dir = argv[1];
  const char *mode = argv[2];
  lookupMode = !strcmp(argv[3], "lookup");
  setvbuf(stdout, NULL, _IONBF, 0);
  mkdir(dir,0755); umount2(dir,MNT_DETACH);
  int F = open("/dev/fuse", O_RDWR|O_CLOEXEC); if (F<0){perror("open");return 1;}
  if (do_mount(F)) { perror("mount"); return 1; }
  int serveFd = F;
  if (!strcmp(mode,"clone")) { serveFd = open("/dev/fuse",O_RDWR|O_CLOEXEC); uint32_t src=F; if (ioctl(serveFd,FUSE_DEV_IOC_CLONE,&src)) {perror("clone");return 1;} }
  pid_t s1 = fork(); if (!s1) { serve(serveFd,"S1",1,4096,0); exit(0);} 
  if (serveFd!=F) close(serveFd);
  usleep(200000); stat_root("parent");
  pid_t r = reader("R");
  usleep(300000);
  fprintf(stderr,"--- SIGKILL S1\n"); kill(s1,SIGKILL); waitpid(s1,0,0);
  usleep(300000);
  int st; pid_t w = waitpid(r,&st,WNOHANG);
  fprintf(stderr,"--- reader after kill: %s\n", w? "ended":"still blocked");
  // new requests while nobody reads: a stat in a child, does it block?
  pid_t q = fork(); if(!q){ stat_root("Q-while-no-server"); exit(0);} usleep(300000);
  fprintf(stderr,"--- Q: %s\n", waitpid(q,0,WNOHANG)? "ended":"blocked (queued)");
  int s2fd = F;
  if (!strcmp(mode,"clone")) { s2fd = open("/dev/fuse",O_RDWR|O_CLOEXEC); uint32_t src=F; if (ioctl(s2fd,FUSE_DEV_IOC_CLONE,&src)) {perror("clone2");return 1;} }
  pid_t s2 = fork(); if (!s2) { serve(s2fd,"S2",0,-1,!strcmp(mode,"resend")); exit(0);} 
  double t=now(); if (!w) waitpid(r,&st,0);
  fprintf(stderr,"--- reader result: exit %d (%.2fs after S2)\n", WEXITSTATUS(st), now()-t);
  waitpid(q,0,0);
  stat_root("parent-after");
  if (!strcmp(mode,"abort")) {}
  umount2(dir,MNT_DETACH); waitpid(s2,0,0); close(F);
  return 0;
}
