import assert from "node:assert/strict";
import { bytesQuantity, nonNegativeQuantity, parseQuantity } from "./quantity.ts";

Deno.test("parseQuantity() reads decimal, binary and exponent suffixes and signs", () => {
  assert.equal(parseQuantity("100m"), 0.1);
  assert.equal(parseQuantity("64Mi"), 64 * 2 ** 20);
  assert.equal(parseQuantity("1G"), 1e9);
  assert.equal(parseQuantity("1.5Gi"), 1.5 * 2 ** 30);
  assert.equal(parseQuantity("1e3"), 1000);
  assert.equal(parseQuantity("-1"), -1);
  assert.equal(parseQuantity("lots"), undefined);
  assert.equal(parseQuantity("1Gb"), undefined);
});

Deno.test("nonNegativeQuantity() refuses negative values; bytesQuantity() writes binary SI", () => {
  assert.equal(nonNegativeQuantity("-1"), undefined);
  assert.equal(nonNegativeQuantity("0"), 0);
  assert.equal(bytesQuantity(5 * 2 ** 30), "5Gi");
  assert.equal(bytesQuantity(1536 * 2 ** 20), "1536Mi");
  assert.equal(bytesQuantity(1000), "1000");
});
