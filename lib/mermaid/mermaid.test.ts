import { describe, expect, it } from "vitest";
import { extractConstraints, MermaidError, validateMermaid } from "@/lib/mermaid";

const SEED_EXAMPLE = `flowchart TD
  A[Login Page] --> B{Authenticated?}
  B -->|Yes| C[Dashboard]
  B -->|No| D[Error Page]`;

async function parseError(source: string): Promise<MermaidError> {
  try {
    await validateMermaid(source);
  } catch (error) {
    if (error instanceof MermaidError) return error;
    throw error;
  }
  throw new Error("expected the diagram to be refused");
}

describe("the seed's example", () => {
  it("yields exactly the three routes and the Authenticated? branch", async () => {
    const c = await extractConstraints(SEED_EXAMPLE);
    expect(c.diagramType).toBe("flowchart");
    expect(c.requiredRoutes).toEqual(["Login Page", "Dashboard", "Error Page"]);
    expect(c.requiredComponents).toEqual([]);
    expect(c.conditionalBranches).toEqual([
      {
        condition: "Authenticated?",
        branches: [
          { label: "Yes", target: "Dashboard" },
          { label: "No", target: "Error Page" },
        ],
      },
    ]);
    expect(c.validationRules).toEqual([
      'Route "Login Page" exists',
      'Route "Dashboard" exists',
      'Route "Error Page" exists',
      'When "Authenticated?" is "Yes", go to "Dashboard"',
      'When "Authenticated?" is "No", go to "Error Page"',
    ]);
  });

  it("accepts the diagram inside a ```mermaid fence, as models often send it", async () => {
    const c = await extractConstraints("```mermaid\n" + SEED_EXAMPLE + "\n```");
    expect(c.requiredRoutes).toEqual(["Login Page", "Dashboard", "Error Page"]);
  });
});

describe("valid diagrams of every supported type", () => {
  it("flowchart: databases, subroutines and subgraphs are components", async () => {
    const c = await extractConstraints(`flowchart LR
  subgraph Auth
    A[Login Page]
  end
  A --> B[(Users DB)]
  A --> C[[Session Service]]`);
    expect(c.requiredRoutes).toEqual(["Login Page"]);
    expect(c.requiredComponents).toEqual(["Users DB", "Session Service", "Auth"]);
  });

  it("sequence: participants by their display names and messages as rules", async () => {
    const c = await extractConstraints(`sequenceDiagram
  participant U as User
  U->>API: login
  API-->>U: token`);
    expect(c.diagramType).toBe("sequence");
    expect(c.participants).toEqual(["User", "API"]);
    expect(c.validationRules).toEqual(['User sends "login" to API', 'API sends "token" to User']);
  });

  it("class: classes are components", async () => {
    const c = await extractConstraints(`classDiagram
  class Animal {
    +String name
    +eat()
  }
  Animal <|-- Dog`);
    expect(c.diagramType).toBe("class");
    expect(c.requiredComponents).toEqual(["Animal", "Dog"]);
    expect(c.relationships).toEqual([{ from: "Animal", to: "Dog", label: "" }]);
  });

  it("ER: entities with attributes are data entities", async () => {
    const c = await extractConstraints(`erDiagram
  CUSTOMER ||--o{ ORDER : places
  CUSTOMER {
    string name PK
    int age
  }`);
    expect(c.diagramType).toBe("er");
    expect(c.dataEntities).toEqual([
      {
        name: "CUSTOMER",
        attributes: [
          { type: "string", name: "name", keys: ["PK"] },
          { type: "int", name: "age", keys: [] },
        ],
      },
      { name: "ORDER", attributes: [] },
    ]);
    expect(c.validationRules).toContain("CUSTOMER places ORDER");
  });

  it("state: states without the start/end markers, transitions as rules", async () => {
    const c = await extractConstraints(`stateDiagram-v2
  [*] --> Idle
  Idle --> Running : start
  Running --> [*]`);
    expect(c.diagramType).toBe("state");
    expect(c.states).toEqual(["Idle", "Running"]);
    expect(c.validationRules).toContain('Idle → Running on "start"');
  });
});

describe("invalid diagrams are refused with the parser's message and line", () => {
  it.each([
    ["flowchart", "flowchart TD\n  A[Start] --> B\n  B -->> {{", 3],
    ["sequence", "sequenceDiagram\n  Alice->>: Hi", 2],
    ["class", "classDiagram\n  class A {{", 2],
    ["ER", "erDiagram\n  CUSTOMER ||--o{ : places", 2],
    ["state", "stateDiagram-v2\n  [*] --> --> S1", 2],
  ])("%s", async (_name, source, line) => {
    const error = await parseError(source);
    expect(error.code).toBe("bad_request:mermaid");
    expect(error.line).toBe(line);
    expect(error.message).toContain(`line ${line}`);
    expect(error.parserMessage).toMatch(/Expecting|Parse error/);
  });

  it("names the line once, in the diagram's own numbering, without the parser's header and excerpt", async () => {
    const error = await parseError("flowchart TD\n  A --> B\n  B -->");
    expect(error.line).toBe(3);
    expect(error.message).toMatch(/^Invalid Mermaid on line 3: Expecting .*got the end of the diagram$/);
    expect(error.message).not.toContain("Parse error on line");
  });

  it("an unknown diagram type names the types that are accepted", async () => {
    const error = await parseError("nonsense diagram");
    expect(error.line).toBe(1);
    expect(error.message).toContain("flowchart TD");
  });

  it("a diagram type mermaid knows but Gatehouse does not support is refused", async () => {
    const error = await parseError('pie title Pets\n  "Dogs" : 386');
    expect(error.message).toContain("not supported");
  });

  it("an empty diagram is refused", async () => {
    const error = await parseError("   ");
    expect(error.line).toBe(1);
  });
});

describe("concurrency", () => {
  it("parallel extractions never read each other's diagram", async () => {
    const sources = Array.from({ length: 6 }, (_, i) => `flowchart TD\n  A${i}[Page ${i}] --> B${i}[Next ${i}]`);
    const results = await Promise.all(sources.map((s) => extractConstraints(s)));
    results.forEach((c, i) => expect(c.requiredRoutes).toEqual([`Page ${i}`, `Next ${i}`]));
  });
});
