import { describePostgres } from "../support/postgresSuite.js"
import { pgStore } from "../support/sqlStores.js"
import { toolGateSuite } from "./toolGateSuite.js"

describePostgres("contract tests", (url) => toolGateSuite("postgres", () => pgStore(url)))
