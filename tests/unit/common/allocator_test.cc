// The allocator the build promises (CMakeLists.txt, hots3_malloc) is the one malloc resolves to:
// the dynamic linker binds every malloc of the process, SQLite's and libstdc++'s included, to
// the first library in its search order that defines it. Dropped from the link line (an
// --as-needed link where nothing calls it directly) or placed after libc, mimalloc would be
// loaded for nothing.

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <string_view>

namespace {

TEST(Allocator, MallocResolvesToMimallocWhereTheBuildLinksIt) {
#if defined(H3_MIMALLOC_LINKED)
  void* const malloc_in_use = dlsym(RTLD_DEFAULT, "malloc");
  ASSERT_NE(malloc_in_use, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(malloc_in_use, &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  EXPECT_NE(std::string_view(info.dli_fname).find("mimalloc"), std::string_view::npos)
      << "malloc comes from " << info.dli_fname;
#else
  GTEST_SKIP() << "built without mimalloc (a sanitizer build, or -DH3_MIMALLOC=OFF)";
#endif
}

}  // namespace
