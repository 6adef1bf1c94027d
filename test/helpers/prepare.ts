// Run once before the suite: builds the template databases so test files only clone them.
import { preparePgliteTemplate, preparePostgresTemplate } from './database.js';

if (process.env.DATABASE_URL) {
  console.log(`test template database: ${await preparePostgresTemplate(process.env.DATABASE_URL)}`);
} else {
  console.log(`test template: ${await preparePgliteTemplate()}`);
}
