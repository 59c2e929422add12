// no-io-uring COMMAND [ARGS...]: runs COMMAND with io_uring_setup refused (EPERM), the way the
// seccomp profiles of Docker, containerd and others refuse it, so that tests can run the real
// server where io_uring is unavailable. A seccomp filter is inherited by every thread and every
// program exec'd after it, and cannot be lifted. No libseccomp: a four-instruction BPF program.
//
// Exit codes: COMMAND's (it replaces this process); 77 when this kernel does not let an
// unprivileged process install a filter (tests skip); 1 for any other failure.

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425  // the same number on every architecture (Linux 5.1+)
#endif

#if defined(__x86_64__)
#define H3_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define H3_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "no-io-uring: add this architecture's AUDIT_ARCH_ value"
#endif

namespace {

sock_filter statement(std::uint16_t code, std::uint32_t k) { return sock_filter{code, 0, 0, k}; }
sock_filter jump(std::uint16_t code, std::uint32_t k, std::uint8_t if_true, std::uint8_t if_false) {
  return sock_filter{code, if_true, if_false, k};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
    return 1;
  }
  constexpr auto kLoad = static_cast<std::uint16_t>(BPF_LD | BPF_W | BPF_ABS);
  constexpr auto kJumpIfEqual = static_cast<std::uint16_t>(BPF_JMP | BPF_JEQ | BPF_K);
  constexpr auto kReturn = static_cast<std::uint16_t>(BPF_RET | BPF_K);
  sock_filter program[] = {
      // A foreign ABI's system call numbers mean other calls: refuse none of them.
      statement(kLoad, static_cast<std::uint32_t>(offsetof(seccomp_data, arch))),
      jump(kJumpIfEqual, H3_AUDIT_ARCH, 1, 0),
      statement(kReturn, SECCOMP_RET_ALLOW),
      statement(kLoad, static_cast<std::uint32_t>(offsetof(seccomp_data, nr))),
      jump(kJumpIfEqual, __NR_io_uring_setup, 0, 1),
      statement(kReturn,
                SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(EPERM) & SECCOMP_RET_DATA)),
      statement(kReturn, SECCOMP_RET_ALLOW),
  };
  sock_fprog fprog{static_cast<unsigned short>(sizeof(program) / sizeof(program[0])), program};
  // Without privileges, a filter needs no_new_privs (so no set-uid program runs under it).
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
    std::fprintf(stderr, "no-io-uring: cannot install the seccomp filter: %s\n",
                 std::strerror(errno));
    return 77;
  }
  // Prove it: io_uring_setup(0, NULL) is EINVAL or EFAULT when allowed, EPERM when refused.
  errno = 0;
  if (::syscall(__NR_io_uring_setup, 0, nullptr) != -1 || errno != EPERM) {
    std::fprintf(stderr, "no-io-uring: the filter does not refuse io_uring_setup (errno %d)\n",
                 errno);
    return 1;
  }
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "no-io-uring: cannot run %s: %s\n", argv[1], std::strerror(errno));
  return 1;
}
