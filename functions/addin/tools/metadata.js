// Writes functions.json from the JSDoc of functions.js with Microsoft's
// custom-functions-metadata, through its API (its command line also loads
// a usage-data reporter, which this tool does not want).
//
//   node tools/metadata.js functions.js functions.json   write the file
//   node tools/metadata.js functions.js -                print it
"use strict";
const fs = require("fs");
const { generateCustomFunctionsMetadata } = require("custom-functions-metadata");

async function main() {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    console.error("usage: node tools/metadata.js functions.js functions.json|-");
    process.exit(2);
  }
  const res = await generateCustomFunctionsMetadata(input);
  if (res.errors.length > 0) {
    res.errors.forEach((e) => console.error(e));
    process.exit(1);
  }
  const json = res.metadataJson + "\n";
  if (output === "-") {
    process.stdout.write(json);
  } else {
    fs.writeFileSync(output, json);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
