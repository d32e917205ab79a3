//===- GemmLayoutTest.cpp - Which strided matrices cuBLAS reads -----------===//

#include "weft/runtime/GemmLayout.h"

#include <gtest/gtest.h>

using weft::runtime::columnMajorLayout;

namespace {

TEST(GemmLayoutTest, RowMajorIsReadTransposed) {
  // [4, 8] row-major, and a view of its first 3 columns.
  auto whole = columnMajorLayout(4, 8, 8, 1);
  ASSERT_TRUE(whole);
  EXPECT_TRUE(whole->transposed);
  EXPECT_EQ(whole->ld, 8);
  auto columns = columnMajorLayout(4, 3, 8, 1);
  ASSERT_TRUE(columns);
  EXPECT_EQ(columns->ld, 8);
}

TEST(GemmLayoutTest, ColumnMajorIsReadAsItIs) {
  auto layout = columnMajorLayout(8, 16, 1, 8);
  ASSERT_TRUE(layout);
  EXPECT_FALSE(layout->transposed);
  EXPECT_EQ(layout->ld, 8);
}

TEST(GemmLayoutTest, SizeOneDimsNeedNoStride) {
  // A row vector [1, 5] whose row stride is meaningless (0).
  auto row = columnMajorLayout(1, 5, 0, 1);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->ld, 5);
  // A column vector [5, 1] with a column stride of 0: read as the [1, 5]
  // row, whose leading dimension need only cover its one row.
  auto column = columnMajorLayout(5, 1, 1, 0);
  ASSERT_TRUE(column);
  EXPECT_TRUE(column->transposed);
  EXPECT_EQ(column->ld, 1);
}

TEST(GemmLayoutTest, NoContiguousDimOrOverlappingRowsIsRefused) {
  EXPECT_FALSE(columnMajorLayout(2, 3, 6, 2));
  // Rows 4 apart holding 8 columns would overlap.
  EXPECT_FALSE(columnMajorLayout(3, 8, 4, 1));
}

} // namespace
