// The Java Admin (Kafka 4.3.1) sending one CreateAcls and one DeleteAcls that each mix entries a
// proxy virtual cluster relays with entries it answers itself, for compat_tests/proxy/test_proxy_tenants.py:
//   java TenantAcls <bootstrap> <topic> <group>
// prints one line per binding and per filter, in request order: "<what> OK [n]" or
// "<what> <exception class>: <message>".
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateAclsResult;
import org.apache.kafka.clients.admin.DeleteAclsResult;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public class TenantAcls {
    static AclBinding binding(ResourceType type, String name, PatternType pattern, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
            new AccessControlEntry("User:app", "*", op, AclPermissionType.ALLOW));
    }

    static void report(String what, KafkaFuture<?> future, String ok) {
        try {
            future.get();
            System.out.println(what + " OK" + ok);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            System.out.println(what + " " + c.getClass().getSimpleName() + ": " + c.getMessage());
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            List<AclBinding> bindings = List.of(
                binding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.ALTER),
                binding(ResourceType.TOPIC, args[1], PatternType.LITERAL, AclOperation.READ),
                binding(ResourceType.GROUP, args[2], PatternType.PREFIXED, AclOperation.READ));
            CreateAclsResult created = admin.createAcls(bindings);
            for (AclBinding b : bindings) {
                report("create " + b.pattern().resourceType(), created.values().get(b), "");
            }
            List<AclBindingFilter> filters = new ArrayList<>();
            filters.add(new AclBindingFilter(  // every topic ACL: no resource name, refused by the proxy
                new ResourcePatternFilter(ResourceType.TOPIC, null, PatternType.ANY), AccessControlEntryFilter.ANY));
            filters.add(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, args[1], PatternType.LITERAL), AccessControlEntryFilter.ANY));
            DeleteAclsResult deleted = admin.deleteAcls(filters);
            for (AclBindingFilter f : filters) {
                KafkaFuture<DeleteAclsResult.FilterResults> r = deleted.values().get(f);
                String name = f.patternFilter().name() == null ? "any" : "named";
                try {
                    int n = r.get().values().size();
                    report("delete " + name, r, " " + n);
                } catch (ExecutionException e) {
                    report("delete " + name, r, "");
                }
            }
        }
    }
}
