import java.io.FileInputStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

// Prints, one per line, the subject of each PEM certificate named on the
// command line as ZooKeeper's X509AuthenticationProvider names a client:
// X500Principal.getName(), the RFC 2253 form.
public class X500Names {
    public static void main(String[] args) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        for (String path : args) {
            try (FileInputStream in = new FileInputStream(path)) {
                X509Certificate c = (X509Certificate) cf.generateCertificate(in);
                System.out.println(c.getSubjectX500Principal().getName());
            }
        }
    }
}
