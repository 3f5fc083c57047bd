// Tests of the SHA-256 helpers against the FIPS 180-4 example vectors.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/hash.h"
#include "eval/temp_dir.h"

namespace vispco {

TEST(Sha256, MatchesFipsVectorsIncrementallyAndOnFiles) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 h;
  h.update("ab");
  h.update("c");
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));  // a second call repeats the digest
  EXPECT_THROW(h.update("x"), Error);
  test::TempDir tmp;
  test::write_text(tmp / "f", "abc");
  EXPECT_EQ(sha256_file_hex(tmp / "f"), sha256_hex("abc"));
  EXPECT_THROW(sha256_file_hex(tmp / "missing"), IoError);
}

}  // namespace vispco
