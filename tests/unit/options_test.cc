// The options table: its three sections, the one boolean syntax, and that the heap
// profiler's and the heap checker's flags parse through it with gperftools' defaults.
#include "api/options.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tcm {
namespace {

Options Apply(std::initializer_list<const char*> records, std::string* warnings = nullptr) {
  Options o;
  testing::internal::CaptureStderr();
  ApplyOptionRecords(records.begin(), records.size(), &o);
  std::string err = testing::internal::GetCapturedStderr();
  if (warnings != nullptr) *warnings = err;
  return o;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Options, EveryRowHasASectionAndAUniqueName) {
  size_t n;
  const OptionSpec* table = OptionTable(&n);
  int per_section[3] = {};
  for (size_t i = 0; i < n; ++i) {
    ++per_section[table[i].section];
    EXPECT_EQ(FindOption(table[i].name), &table[i]) << table[i].name;
    if (i > 0) {
      EXPECT_GE(table[i].section, table[i - 1].section) << "rows are ordered by section";
    }
  }
  EXPECT_GT(per_section[OptionSpec::kAllocator], 0);
  EXPECT_EQ(per_section[OptionSpec::kHeapProfiler], 4);
  EXPECT_EQ(per_section[OptionSpec::kHeapChecker], 14);
  EXPECT_STREQ(SectionName(FindOption("HEAPPROFILE")->section), "heap profiler");
  EXPECT_STREQ(SectionName(FindOption("HEAP_CHECK_MAX_LEAKS")->section), "heap checker");
  EXPECT_STREQ(SectionName(FindOption("TCMALLOC_SKIP_MMAP")->section), "allocator");
  EXPECT_EQ(FindOption("HEAP_CHECK_NO_SUCH_FLAG"), nullptr);
}

TEST(Options, DefaultsAreGperftools) {
  const Options o;
  EXPECT_EQ(o.heap_profiler.prefix[0], '\0');
  EXPECT_EQ(o.heap_profiler.allocation_interval, int64_t{1} << 30);
  EXPECT_EQ(o.heap_profiler.inuse_interval, int64_t{100} << 20);
  EXPECT_EQ(o.heap_profiler.time_interval, 0);
  EXPECT_EQ(o.heap_checker.level[0], '\0');
  EXPECT_FALSE(o.heap_checker.after_destructors);
  EXPECT_TRUE(o.heap_checker.ignore_thread_live);
  EXPECT_TRUE(o.heap_checker.ignore_global_live);
  EXPECT_EQ(o.heap_checker.max_leaks, 20);
  EXPECT_EQ(o.heap_checker.pointer_source_alignment, 8);
  EXPECT_EQ(o.heap_checker.max_pointer_offset, 1024);
  EXPECT_EQ(o.heap_checker.stack_depth, 32);
  EXPECT_STREQ(o.heap_checker.dump_directory, "/tmp");
  EXPECT_STREQ(o.heap_checker.pprof_path, "pprof");
}

TEST(Options, ProfilerAndCheckerFlagsParseThroughTheTable) {
  std::string warnings;
  const Options o = Apply({"HEAPPROFILE=/tmp/prof", "HEAP_PROFILE_ALLOCATION_INTERVAL=10M",
                           "HEAP_PROFILE_INUSE_INTERVAL=5k", "HEAP_PROFILE_TIME_INTERVAL=3",
                           "HEAPCHECK=strict", "HEAP_CHECK_MAX_LEAKS=-1", "HEAP_CHECK_MAX_POINTER_OFFSET=-1",
                           "HEAP_CHECK_STACK_DEPTH=64", "HEAP_CHECK_DUMP_DIRECTORY=/var/tmp",
                           "PPROF_PATH=/opt/pprof", "HEAP_CHECK_IGNORE_LIBS=libfoo:libbar",
                           "PERFTOOLS_VERBOSE=2", "HEAP_CHECK_POINTER_SOURCE_ALIGNMENT=1"},
                          &warnings);
  EXPECT_EQ(warnings, "");
  EXPECT_STREQ(o.heap_profiler.prefix, "/tmp/prof");
  EXPECT_EQ(o.heap_profiler.allocation_interval, 10 << 20);
  EXPECT_EQ(o.heap_profiler.inuse_interval, 5 << 10);
  EXPECT_EQ(o.heap_profiler.time_interval, 3);
  EXPECT_STREQ(o.heap_checker.level, "strict");
  EXPECT_EQ(o.heap_checker.max_leaks, -1);
  EXPECT_EQ(o.heap_checker.max_pointer_offset, -1);
  EXPECT_EQ(o.heap_checker.stack_depth, 64);
  EXPECT_STREQ(o.heap_checker.dump_directory, "/var/tmp");
  EXPECT_STREQ(o.heap_checker.pprof_path, "/opt/pprof");
  EXPECT_STREQ(o.heap_checker.ignore_libs, "libfoo:libbar");
  EXPECT_EQ(o.heap_checker.verbose, 2);
  EXPECT_EQ(o.heap_checker.pointer_source_alignment, 1);
}

// The parsers used to disagree: the allocator took "y"/"n" (the checker warned about them)
// and read an empty value as false, the checker took "t"/"f". Now every section reads the
// same eight words, case-insensitively, and rejects "y" and "t" alike.
TEST(Options, OneBooleanSyntaxInEverySection) {
  const char* const kTrue[] = {"1", "true", "TRUE", "Yes", "on", "ON"};
  const char* const kFalse[] = {"0", "false", "False", "NO", "off", "Off"};
  const char* const kBools[] = {"HEAP_CHECK_IDENTIFY_LEAKS", "HEAP_CHECK_AFTER_DESTRUCTORS",
                                "TCMALLOC_AGGRESSIVE_DECOMMIT"};
  for (const char* name : kBools) {
    const OptionSpec* spec = FindOption(name);
    ASSERT_NE(spec, nullptr);
    ASSERT_EQ(spec->kind, OptionSpec::kBool);
    for (const char* v : kTrue) {
      Options o;
      EXPECT_EQ(ParseOption(*spec, v, &o), nullptr) << name << "=" << v;
      EXPECT_TRUE(*reinterpret_cast<bool*>(reinterpret_cast<char*>(&o) + spec->offset)) << name << "=" << v;
    }
    for (const char* v : kFalse) {
      Options o;
      *reinterpret_cast<bool*>(reinterpret_cast<char*>(&o) + spec->offset) = true;
      EXPECT_EQ(ParseOption(*spec, v, &o), nullptr) << name << "=" << v;
      EXPECT_FALSE(*reinterpret_cast<bool*>(reinterpret_cast<char*>(&o) + spec->offset)) << name << "=" << v;
    }
    for (const char* v : {"y", "t", "maybe", "2"}) {
      Options o;
      EXPECT_STREQ(ParseOption(*spec, v, &o), "not a boolean") << name << "=" << v;
    }
  }
  // End to end through the records, one section after another.
  std::string warnings;
  const Options o = Apply({"HEAP_CHECK_IGNORE_GLOBAL_LIVE=Off", "HEAP_CHECK_TEST_POINTER_ALIGNMENT=Yes",
                           "TCMALLOC_SKIP_SBRK=Yes"},
                          &warnings);
  EXPECT_EQ(warnings, "");
  EXPECT_FALSE(o.heap_checker.ignore_global_live);
  EXPECT_TRUE(o.heap_checker.test_pointer_alignment);
  EXPECT_TRUE(o.skip_sbrk);
}

TEST(Options, BadValuesAreWarnedOnceAndDefaulted) {
  std::string warnings;
  const Options o = Apply({"HEAP_CHECK_MAX_LEAKS=lots", "HEAP_CHECK_IDENTIFY_LEAKS=t",
                           "HEAP_PROFILE_INUSE_INTERVAL=-3", "HEAP_CHECK_STACK_DEPTH=65",
                           "HEAP_CHECK_POINTER_SOURCE_ALIGNMENT=16"},
                          &warnings);
  EXPECT_EQ(o.heap_checker.max_leaks, 20);
  EXPECT_FALSE(o.heap_checker.identify_leaks);
  EXPECT_EQ(o.heap_profiler.inuse_interval, int64_t{100} << 20);
  EXPECT_EQ(o.heap_checker.stack_depth, 32);
  EXPECT_EQ(o.heap_checker.pointer_source_alignment, 8);
  EXPECT_EQ(Count(warnings, "ignoring HEAP_CHECK_MAX_LEAKS=lots: not an integer; using the default 20"), 1)
      << warnings;
  EXPECT_EQ(Count(warnings, "ignoring HEAP_CHECK_IDENTIFY_LEAKS=t: not a boolean; using the default false"), 1)
      << warnings;
  EXPECT_EQ(Count(warnings, "ignoring HEAP_PROFILE_INUSE_INTERVAL=-3: out of range"), 1) << warnings;
  EXPECT_EQ(Count(warnings, "ignoring HEAP_CHECK_STACK_DEPTH=65: out of range"), 1) << warnings;
  EXPECT_EQ(Count(warnings, "ignoring HEAP_CHECK_POINTER_SOURCE_ALIGNMENT=16: out of range"), 1) << warnings;
  EXPECT_EQ(Count(warnings, "\n"), 5) << warnings;
}

TEST(Options, EmptyValueIsUnsetAndOtherVariablesAreSkipped) {
  std::string warnings;
  const Options o = Apply({"HEAP_CHECK_DUMP_DIRECTORY=", "HEAP_CHECK_MAX_LEAKS=", "HEAPCHECKER=normal",
                           "HEAP=1", "PATH=/bin", "HEAPCHECK"},
                          &warnings);
  EXPECT_EQ(warnings, "");
  EXPECT_STREQ(o.heap_checker.dump_directory, "/tmp");
  EXPECT_EQ(o.heap_checker.max_leaks, 20);
  EXPECT_EQ(o.heap_checker.level[0], '\0');
}

TEST(Options, StringsLongerThanTheirFieldAreRejected) {
  std::string level(100, 'x');
  std::string record = "HEAPCHECK=" + level;
  std::string warnings;
  const Options o = Apply({record.c_str()}, &warnings);
  EXPECT_EQ(o.heap_checker.level[0], '\0');
  EXPECT_EQ(Count(warnings, "too long"), 1) << warnings;
}

}  // namespace
}  // namespace tcm
