// GGUF reader and writer: round trips, llama.cpp-written files, and every kind of bad
// input failing with cln::Error (never a crash).
#include <gtest/gtest.h>

#include <cstring>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"

using namespace cln;

namespace {

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("clone_gguf_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::vector<uint8_t> read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string write_small() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("some.u32", GgufValue::u32(7));
  w.set("some.f32", GgufValue::f32(0.5f));
  w.set("some.bool", GgufValue::boolean(true));
  w.set("some.strs", GgufValue::arr_str({"a", "bc", ""}));
  w.set("some.ints", GgufValue::arr_i32({1, -2, 3}));
  w.set("some.floats", GgufValue::arr_f32({1.5, -2.25}));
  std::vector<float> a(6);
  for (int i = 0; i < 6; ++i) a[static_cast<size_t>(i)] = static_cast<float>(i) * 0.25f;
  w.add_tensor("a", DType::F32, {3, 2}, a.data(), a.size() * 4);
  std::vector<uint8_t> q(2 * sizeof(BlockQ8_0), 0x11);
  w.add_tensor("b.weight", DType::Q8_0, {64}, q.data(), q.size());
  const std::string p = tmp_path("small.gguf");
  w.write(p);
  return p;
}

}  // namespace

TEST(Gguf, RoundTrip) {
  auto f = GgufFile::open(write_small());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("some.u32"), 7);
  EXPECT_DOUBLE_EQ(f->get_float("some.f32"), 0.5);
  EXPECT_EQ(f->get_int("some.bool"), 1);
  EXPECT_EQ(f->find("some.strs")->as, (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(f->find("some.ints")->ai, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f->find("some.floats")->af, (std::vector<double>{1.5, -2.25}));
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensorInfo* a = f->find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a->type, DType::F32);
  float v[6];
  std::memcpy(v, f->tensor_data(*a), sizeof v);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], 0.25f * static_cast<float>(i)) << i;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor_data(*a)) % 32, 0u);
  const GgufTensorInfo* b = f->find_tensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, DType::Q8_0);
  EXPECT_EQ(b->ne, (std::vector<int64_t>{64}));
  // Two Q8_0 blocks of 34 bytes (an fp16 scale and 32 quants), every byte as written.
  ASSERT_EQ(b->nbytes, 68u);
  for (size_t i = 0; i < 68; ++i) EXPECT_EQ(f->tensor_data(*b)[i], 0x11) << i;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor_data(*b)) % 32, 0u);
}

TEST(Gguf, ReadsLlamaCppFiles) {
  // 4 layers of 9 tensors (2 norms, q k v o, gate up down) plus token_embd, output_norm
  // and output; in the per-layer files layer 2 has no attention (ffn_norm and the FFN).
  const std::pair<const char*, size_t> files[] = {{"golden-f32.gguf", 39},
                                                  {"golden-q8_0.gguf", 39},
                                                  {"golden-q4_0.gguf", 39},
                                                  {"golden-per-layer-f32.gguf", 34},
                                                  {"golden-per-layer-q4_0.gguf", 34}};
  for (const auto& [name, n_tensors] : files) {
    auto f = GgufFile::open(std::string(CLONE_SHARED_DIR) + "/data/golden-gguf/" + name);
    EXPECT_EQ(f->tensors().size(), n_tensors) << name;
    EXPECT_TRUE(f->has("tokenizer.ggml.tokens")) << name;
    // A file re-written by clone is the file llama.cpp's gguf writer wrote, byte for byte
    // (same layout, padding and alignment); and it reads back with the same keys, values
    // and tensors (which says where, if the bytes ever differ).
    GgufWriter w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, f->tensor_data(t), t.nbytes);
    const std::string p = tmp_path(std::string("rewrite_") + name);
    w.write(p);
    EXPECT_TRUE(read_all(p) == read_all(f->path()))
        << name << ": rewrite differs from the original";
    auto g = GgufFile::open(p);
    ASSERT_EQ(g->metadata().size(), f->metadata().size());
    for (size_t i = 0; i < f->metadata().size(); ++i) {
      const auto& [key, want] = f->metadata()[i];
      const GgufValue& got = g->metadata()[i].second;
      SCOPED_TRACE(key);
      EXPECT_EQ(g->metadata()[i].first, key);
      EXPECT_EQ(got.type, want.type);
      EXPECT_EQ(got.elem, want.elem);
      EXPECT_EQ(got.i, want.i);
      EXPECT_EQ(got.f, want.f);
      EXPECT_EQ(got.s, want.s);
      EXPECT_EQ(got.ai, want.ai);
      EXPECT_EQ(got.af, want.af);
      EXPECT_EQ(got.as, want.as);
    }
    ASSERT_EQ(g->tensors().size(), f->tensors().size());
    for (size_t i = 0; i < f->tensors().size(); ++i) {
      const GgufTensorInfo &t = f->tensors()[i], &u = g->tensors()[i];
      EXPECT_EQ(u.name, t.name);
      EXPECT_EQ(u.type, t.type) << t.name;
      EXPECT_EQ(u.ne, t.ne) << t.name;
      ASSERT_EQ(u.nbytes, t.nbytes) << t.name;
      EXPECT_EQ(0, std::memcmp(f->tensor_data(t), g->tensor_data(u), t.nbytes)) << t.name;
    }
  }
}

TEST(Gguf, EveryTruncationFailsCleanly) {
  const auto bytes = read_all(write_small());
  // The file may end right after the last tensor's bytes (its alignment padding is optional).
  size_t needed = 0;
  {
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "whole");
    for (const auto& t : f->tensors())
      needed = std::max(needed, static_cast<size_t>(f->tensor_data(t) - bytes.data()) + t.nbytes);
  }
  ASSERT_GT(needed, 0u);
  for (size_t n = 0; n < needed; ++n) {
    EXPECT_THROW(GgufFile::parse(bytes.data(), n, "truncated"), Error) << "prefix of " << n;
  }
  for (size_t n = needed; n <= bytes.size(); ++n)
    EXPECT_NO_THROW(GgufFile::parse(bytes.data(), n, "padding cut")) << n;
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  const auto orig = read_all(write_small());
  std::mt19937 rng(1);
  int thrown = 0;
  for (int it = 0; it < 3000; ++it) {
    auto b = orig;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    try {
      auto f = GgufFile::parse(b.data(), b.size(), "corrupt");
      for (const auto& t : f->tensors()) {  // whatever parsed must be inside the buffer
        ASSERT_LE(f->tensor_data(t) + t.nbytes, b.data() + b.size());
      }
    } catch (const Error&) {
      ++thrown;
    }
  }
  EXPECT_GT(thrown, 100);
}

namespace {
// Builds a raw header by hand to reach specific error paths.
struct Raw {
  std::vector<uint8_t> b;
  template <typename T>
  Raw& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Raw& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
};
std::string error_of(const Raw& r) {
  try {
    GgufFile::parse(r.b.data(), r.b.size(), "raw");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
Raw header(uint64_t n_tensors, uint64_t n_kv) {
  Raw r;
  r.put<uint32_t>(0x46554747u).put<uint32_t>(3).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  return r;
}
}  // namespace

TEST(Gguf, BadInputsNameTheProblem) {
  Raw magic;
  magic.put<uint32_t>(0x12345678u).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(0);
  EXPECT_NE(error_of(magic).find("not a GGUF file"), std::string::npos);

  Raw ver;
  ver.put<uint32_t>(0x46554747u).put<uint32_t>(9).put<uint64_t>(0).put<uint64_t>(0);
  EXPECT_NE(error_of(ver).find("version 9"), std::string::npos);

  Raw huge_count = header(0, 1ull << 60);
  EXPECT_NE(error_of(huge_count).find("metadata count"), std::string::npos);

  Raw long_key = header(0, 1);
  long_key.put<uint64_t>(1ull << 40);
  for (int i = 0; i < 64; ++i) long_key.put<uint8_t>(0);
  EXPECT_NE(error_of(long_key).find("claims"), std::string::npos);

  Raw bad_vtype = header(0, 1);
  bad_vtype.str("k").put<uint32_t>(99);
  EXPECT_NE(error_of(bad_vtype).find("unknown value type"), std::string::npos);

  Raw big_array = header(0, 1);
  big_array.str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 50);
  EXPECT_NE(error_of(big_array).find("array items"), std::string::npos);

  auto tensor = [](uint32_t nd, std::vector<int64_t> ne, uint32_t type, uint64_t off) {
    Raw r = header(1, 0);
    r.str("t").put<uint32_t>(nd);
    for (int64_t d : ne) r.put<int64_t>(d);
    r.put<uint32_t>(type).put<uint64_t>(off);
    while (r.b.size() % 32) r.b.push_back(0);
    for (int i = 0; i < 64; ++i) r.b.push_back(0);
    return r;
  };
  EXPECT_NE(error_of(tensor(5, {1, 1, 1, 1, 1}, 0, 0)).find("dimensions"), std::string::npos);
  EXPECT_NE(error_of(tensor(2, {1ll << 40, 1ll << 40}, 0, 0)).find("overflow"), std::string::npos);
  EXPECT_NE(error_of(tensor(1, {-3}, 0, 0)).find("negative"), std::string::npos);
  EXPECT_NE(error_of(tensor(1, {4}, 14, 0)).find("does not support"), std::string::npos);
  EXPECT_NE(error_of(tensor(1, {4}, 0, 7)).find("not aligned"), std::string::npos);
  EXPECT_NE(error_of(tensor(1, {4}, 0, 1ull << 62)).find("past the end"), std::string::npos);
  EXPECT_NE(error_of(tensor(1, {1000}, 0, 0)).find("past the end"), std::string::npos);
  EXPECT_NE(error_of(tensor(1, {33}, 8, 0)).find("blocks"), std::string::npos);
  EXPECT_EQ(error_of(tensor(1, {4}, 0, 0)), "");

  EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), Error);
  const std::string empty = tmp_path("empty.gguf");
  std::ofstream(empty).close();
  EXPECT_THROW(GgufFile::open(empty), Error);
}

TEST(Gguf, TypedGettersNameTheKey) {
  auto f = GgufFile::open(write_small());
  try {
    f->get_int("missing.key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.key"), std::string::npos);
  }
  EXPECT_THROW(f->get_string("some.u32"), Error);
  EXPECT_THROW(f->get_int("some.strs"), Error);
  EXPECT_EQ(f->get_int_per_layer("some.u32", 3), (std::vector<int64_t>{7, 7, 7}));
  EXPECT_EQ(f->get_int_per_layer("some.ints", 3), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_THROW(f->get_int_per_layer("some.ints", 4), Error);
}
